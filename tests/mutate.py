#!/usr/bin/python3
"""mutate.py - mutation testing of zeps' own C code (docs/testing.md, "Mutation testing").

Plants realistic one-line bugs, one at a time, in the files named (or the C
files of server/, worker/lib/ and common/ changed since a commit), rebuilds,
runs the ctest entries that cover them, and reports each mutant as killed (a
test failed), survived (every test passed: a bug the suite would let
through), or stillborn (it does not compile, or the build times out: not
counted). The mutations are the bugs a tired developer writes:

  cmp-flip     a comparison turned over:       <  <->  >=,  >  <->  <=,  == <-> !=
  cmp-edge     a comparison loosened/tightened: <  <->  <=,  >  <->  >=
  bound        a bound shifted by one:          `+ 1` or `- 1` dropped, N -> N+1 in a comparison
  logic        && <-> ||
  drop-assign  an assignment statement removed
  drop-call    a call statement removed
  swap-args    two plain arguments of a call swapped
  zero-offset  an offset replaced by zero:       `x + off]` -> `x]`, `, off,` -> `, 0,`

Every mutant is made from the pristine file and the file is put back after
it, also on Ctrl-C. The build tree is its own (--build, default
build-mutate/, configured like build/ with tests on); the first build is
the slow one, later ones recompile one file and relink.

  tests/mutate.py FILE[:A-B]...           mutants of these files (of lines A-B)
  tests/mutate.py --since REV             of the C files of server/, worker/lib/,
                                          common/ changed since REV
  options: --max N (mutants in all, a seeded sample when there are more;
  default 40), --seed S, --ops cmp-flip,logic,... (default all), --tests
  REGEX (ctest -R; default: every entry but label system) or --tests auto
  (each file's entries from tests/mutate_map.txt, the first pattern that
  matches it; a file it does not name gets every entry but label system),
  --jobs J (tests at once, default 2), --test-timeout S (per test, default
  300), --report FILE (JSON; default <build>/mutants.json), --lines A-B
  (only these lines, with one file), --all-targets (rebuild the whole tree
  for each mutant, not only what its tests run), --list (print the mutants
  and their tests, build and run nothing)

A mutant rebuilds only the targets its tests run (their test binaries, and
the daemons, libraries and tools that tests start: every target but the
other test_ and bench_ programs), and its tests run as their own ctest
calls, J at once, the fastest first (the unmutated run's times, kept in
<build>/mutate-times.json); the first failure starts no more of them
(those running finish), and a RUN_SERIAL entry runs alone.

Prints one line per mutant and a summary: killed / (killed + survived) is the
score. Each survivor is printed with its diff: kill it with a test that
fails on it, or write down why it is equivalent (docs/testing.md).
Exits 0 when it ran (whatever the score), 2 on bad usage.
"""
import argparse
import fnmatch
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import mutate_ledger

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DIRS = ("server/", "worker/lib/", "common/")


def changed_since(rev):
    out = subprocess.run(["git", "-C", SRC, "diff", "--name-only", rev, "--"] +
                         [d for d in DIRS], capture_output=True, text=True, check=True)
    return [f for f in out.stdout.split() if f.endswith(".c") and os.path.exists(
        os.path.join(SRC, f))]


# ------------------------------------------------------------------ mutants

def code_lines(text):
    """(index, line) of the lines that are code: not comments, not
    preprocessor, not inside a block comment; string literals blanked for
    matching (their index kept)."""
    out, in_comment = [], False
    for i, line in enumerate(text.split("\n")):
        s = line
        if in_comment:
            if "*/" not in s:
                continue
            s = " " * (s.index("*/") + 2) + s[s.index("*/") + 2:]
            in_comment = False
        stripped = s.strip()
        if not stripped or stripped.startswith(("#", "//", "*")):
            continue
        if "/*" in s and "*/" not in s[s.index("/*"):]:
            in_comment = True
            s = s[:s.index("/*")]
        s = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), s)
        s = re.sub(r'"(\\.|[^"\\])*"', lambda m: '"' + "_" * (len(m.group(0)) - 2) + '"', s)
        s = re.sub(r"'(\\.|[^'\\])'", lambda m: "'" + "_" * (len(m.group(0)) - 2) + "'", s)
        out.append((i, line, s))
    return out


CMP = [(r"(?<![<>=!])<(?![<=])", "<", ">="), (r"(?<![<>=!-])>(?![>=])", ">", "<="),
       (r"<=", "<=", ">"), (r">=", ">=", "<"), (r"==", "==", "!="), (r"!=", "!=", "==")]
EDGE = [(r"(?<![<>=!])<(?![<=])", "<", "<="), (r"(?<![<>=!-])>(?![>=])", ">", ">="),
        (r"<=", "<=", "<"), (r">=", ">=", ">")]


def in_condition(s, pos):
    """A comparison worth flipping: inside if/while/for/return/?: or an
    assignment of a bool, not a template or include."""
    head = s[:pos]
    return bool(re.search(r"\b(if|while|for|return)\b|\?|=\s*[^=]*$|&&|\|\|", head))


def mutants_of(path, text, ops):
    """Every mutant of one file: dicts with line (0-based), old, new, op."""
    res = []

    def add(op, i, line, new):
        if new != line:
            res.append({"file": path, "line": i, "old": line, "new": new, "op": op})

    for i, line, s in code_lines(text):
        if re.match(r"\s*(static\s+)?(const\s+)?\w[\w\s\*]*\(.*\)\s*$", s) and "(" in s \
                and not re.search(r"\b(if|while|for|return|switch)\b", s):
            pass  # a declaration head: comparisons cannot be in it
        for rx, old, new in CMP if "cmp-flip" in ops else []:
            for m in re.finditer(rx, s):
                if s[m.start() - 1:m.start()] == "-" or not in_condition(s, m.start()):
                    continue  # ->
                if "#include" in s:
                    continue
                add("cmp-flip", i, line, line[:m.start()] + new + line[m.start() + len(old):])
        for rx, old, new in EDGE if "cmp-edge" in ops else []:
            for m in re.finditer(rx, s):
                if s[m.start() - 1:m.start()] == "-" or not in_condition(s, m.start()):
                    continue
                add("cmp-edge", i, line, line[:m.start()] + new + line[m.start() + len(old):])
        if "bound" in ops:
            for m in re.finditer(r"\s[+-] 1\b(?!\.)", s):
                add("bound", i, line, line[:m.start()] + line[m.end():])
            for m in re.finditer(r"(?<![<>])([<>]=?|==)\s*(\d+)\b(?![.\w])", s):  # not >> n
                n = int(m.group(2))
                a, b = m.span(2)
                add("bound", i, line, line[:a] + str(n + 1) + line[b:])
        if "logic" in ops:
            for m in re.finditer(r"&&|\|\|", s):
                new = "||" if m.group(0) == "&&" else "&&"
                add("logic", i, line, line[:m.start()] + new + line[m.end():])
        stmt = s.strip()
        if "drop-assign" in ops and re.match(
                r"^[\w\.\->\[\]\*\s]+?\s*(=|\+=|-=|\*=|\|=|&=|\^=|<<=|>>=)\s*[^=].*;$", stmt) \
                and not re.match(r"^(const\s+|static\s+)?(unsigned\s+|struct\s+)?[A-Za-z_][\w]*"
                                 r"(\s*\*)*\s+\**\w+(\[.*\])?\s*=", stmt) \
                and not stmt.startswith(("return", "case")):
            indent = line[:len(line) - len(line.lstrip())]
            add("drop-assign", i, line, indent + ";")
        if "drop-call" in ops and re.match(r"^\w+\(.*\);$", stmt) and \
                not stmt.startswith(("return", "assert", "zp_info", "zp_warn", "zp_debug",
                                     "zp_error", "printf", "fprintf", "snprintf")):
            indent = line[:len(line) - len(line.lstrip())]
            add("drop-call", i, line, indent + ";")
        if "swap-args" in ops:
            for m in re.finditer(r"\b(\w+)\(([A-Za-z_]\w*), ([A-Za-z_]\w*)([,)])", s):
                if m.group(1) in ("if", "while", "for", "switch", "sizeof", "return"):
                    continue
                a, b = m.span(2), m.span(3)
                new = line[:a[0]] + m.group(3) + ", " + m.group(2) + line[b[1]:]
                add("swap-args", i, line, new)
        if "zero-offset" in ops:
            for m in re.finditer(r"(\w)\s\+\s([A-Za-z_][\w\.\->]*)\]", s):
                add("zero-offset", i, line, line[:m.start(1) + 1] + "]" + line[m.end():])
    return res


# ---------------------------------------------------------------- running

def run(cmd, timeout, **kw):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode(errors="replace") if isinstance(
            e.stdout, bytes) else (e.stdout or "")


def configure(build):
    """build/'s configuration, with -Werror: a mutant the compiler flags
    (an int passed as a pointer) is stillborn, not a survivor."""
    rc, out = run(["cmake", "-S", SRC, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                   "-DZEPS_TESTS=ON", "-DZEPS_PYTHON=ON", "-DZEPS_WERROR=ON"], 600)
    if rc != 0:
        print(out[-3000:], file=sys.stderr)
    return rc == 0


def build_tree(build, jobs, targets=None):
    """Build the tree, or only these targets (and what they depend on)."""
    cmd = ["cmake", "--build", build, "-j", str(jobs)]
    if targets:
        cmd += ["--target"] + sorted(targets)
    rc, out = run(cmd, 1800)
    return rc == 0, out


# ------------------------------------------------------- tests and targets

MAP = os.path.join(SRC, "tests", "mutate_map.txt")
CMAKE_OWN = re.compile(r"^(all|clean|depend|edit_cache|install.*|list_install_components|"
                       r"rebuild_cache|test|(Continuous|Experimental|Nightly)\w*)$")


def read_map():
    """tests/mutate_map.txt: (glob, regex) pairs, in order."""
    pairs = []
    with open(MAP) as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if line:
                glob, rx = line.split(None, 1)
                pairs.append((glob, rx.strip()))
    return pairs


def tests_for(path, args, pairs):
    """The ctest regex of one file's mutants: --tests, or with --tests auto
    the map's first match; None is every entry but label system."""
    if args.tests != "auto":
        return args.tests
    for glob, rx in pairs:
        if fnmatch.fnmatchcase(path, glob):
            return rx
    return None


class Suite:
    """The ctest entries of the build tree: each one's test binary target,
    whether it must run alone, and how long the unmutated run took."""

    def __init__(self, build):
        self.build = build
        rc, out = run(["ctest", "--show-only=json-v1"], 120, cwd=build)
        data = json.loads(out[out.index("{"):]) if rc == 0 else {"tests": []}
        rc, out = run(["cmake", "--build", build, "--target", "help"], 120)
        self.targets = {t for t in re.findall(r"^\.\.\. (\S+)", out, re.M)
                        if not CMAKE_OWN.match(t)}
        self.entries = {}
        for t in data["tests"]:
            props = {p["name"]: p["value"] for p in t.get("properties", [])}
            labels = props.get("LABELS", [])
            cmd = t.get("command") or []
            tgt = os.path.basename(cmd[0]) if cmd and "/bin/" in cmd[0] else "test_" + t["name"]
            self.entries[t["name"]] = {
                "target": tgt if tgt in self.targets else None,
                "serial": bool(props.get("RUN_SERIAL")),
                "system": "system" in (labels if isinstance(labels, list) else [labels])}
        self.times_file = os.path.join(build, "mutate-times.json")
        try:
            with open(self.times_file) as fh:
                self.times = json.load(fh)
        except (OSError, ValueError):
            self.times = {}
        # every target a test may start (the daemons, libzeps, the Python
        # module, zepsctl, the tests' helpers), not the test_/bench_ programs
        self.programs = {t for t in self.targets if not t.startswith(("test_", "bench_"))}

    def select(self, rx):
        """The entries of a --tests regex (None: all but label system)."""
        if rx is None:
            return sorted(n for n, e in self.entries.items() if not e["system"])
        return sorted(n for n in self.entries if re.search(rx, n))

    def targets_of(self, names):
        return self.programs | {self.entries[n]["target"] for n in names
                                if self.entries[n]["target"]}

    def save_times(self):
        with open(self.times_file, "w") as fh:
            json.dump(self.times, fh, indent=1, sort_keys=True)


def test(suite, names, args, learn=False):
    """Run these entries, each its own ctest call, the fastest first,
    args.jobs at once (a RUN_SERIAL one alone); after the first failure
    start no more (those running finish: their processes clean up after
    themselves). Returns (failed?, the failures)."""
    order = sorted(names, key=lambda n: (suite.times.get(n, 1e9), n))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    running, failed = {}, []

    def launch(n):
        cmd = ["ctest", "-R", "^" + re.escape(n) + "$", "--timeout", str(args.test_timeout)]
        return subprocess.Popen(cmd, cwd=suite.build, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def reap():
        time.sleep(0.2)
        for n, (p, t0) in list(running.items()):
            if p.poll() is None:
                continue
            out = p.stdout.read()
            p.stdout.close()
            del running[n]
            m = re.search(r"^\s*\d+/\d+ Test\s+#\d+: \S+ \.+\**\s*([^\d]+?)\s+\d", out, re.M)
            if p.returncode != 0:
                failed.append(f"{n} ({m.group(1).strip() if m else 'rc ' + str(p.returncode)})")
            elif learn:
                suite.times[n] = round(time.time() - t0, 1)

    while order and not failed:
        serial = suite.entries.get(order[0], {}).get("serial")
        busy = any(suite.entries.get(r, {}).get("serial") for r in running)
        limit = 1 if serial or busy else args.jobs
        if len(running) < limit:
            n = order.pop(0)
            running[n] = (launch(n), time.time())
        else:
            reap()
    while running:
        reap()
    return bool(failed), failed


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", help="FILE or FILE:A-B (only lines A to B)")
    ap.add_argument("--since")
    ap.add_argument("--max", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", default="cmp-flip,cmp-edge,bound,logic,drop-assign,drop-call,"
                                     "swap-args,zero-offset")
    ap.add_argument("--tests", help="a ctest regex, or auto (tests/mutate_map.txt)")
    ap.add_argument("--lines", help="A-B: only mutants of these lines (1-based, with one file)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--test-timeout", type=int, default=300)
    ap.add_argument("--build", default=os.path.join(SRC, "build-mutate"))
    ap.add_argument("--report")
    ap.add_argument("--all-targets", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--ledger-file", default=os.path.join(SRC, "tests", "mutants.jsonl"))
    ap.add_argument("--no-ledger", action="store_true")
    ap.add_argument("--ledger", nargs="*", metavar="PATH")
    ap.add_argument("--equivalent", nargs=2, metavar=("ID", "REASON"))
    ap.add_argument("--killed", nargs=2, metavar=("ID", "HOW"))
    ap.add_argument("--rerun", nargs="+", metavar="ID", default=[])
    args = ap.parse_args()
    if args.ledger is not None or args.equivalent or args.killed:
        return args
    if args.since:
        args.files += changed_since(args.since)
    if not args.files and not args.rerun:
        ap.error("name files, or --since REV, or --rerun ID")
    return args


def rerun(args, pairs):
    """The ledger's mutants named by id (or a prefix), planted at their
    line as it is now; an id that names none, or whose line is gone, is
    bad usage."""
    state = mutate_ledger.fold(mutate_ledger.read(args.ledger_file))
    out = []
    for ident in args.rerun:
        hits = [s for i, s in state.items() if i.startswith(ident)]
        if len(hits) != 1:
            print(f"mutate.py: {len(hits)} mutants in the ledger have an id starting "
                  f"with {ident!r}", file=sys.stderr)
            sys.exit(2)
        s = hits[0]
        with open(os.path.join(SRC, s["file"])) as fh:
            lines = fh.read().split("\n")
        at = mutate_ledger.locate(s, lines)
        if at is None:
            print(f"mutate.py: {s['id']}: {s['file']} no longer has the line {s['old']!r}",
                  file=sys.stderr)
            sys.exit(2)
        line = lines[at - 1]
        indent = line[:len(line) - len(line.lstrip())]
        out.append({"file": s["file"], "line": at - 1, "old": line, "new": indent + s["new"],
                    "op": s["op"], "tests": tests_for(s["file"], args, pairs)})
    return out


def pick(args):
    """The mutants of the files named, a seeded sample of args.max."""
    ops = set(args.ops.split(","))
    pairs = read_map() if args.tests == "auto" else []
    again, everything = rerun(args, pairs), []
    for f in args.files:
        spec = args.lines
        if re.search(r":\d+-\d+$", f):
            f, spec = f.rsplit(":", 1)
        lo, hi = (int(x) for x in spec.split("-")) if spec else (1, 1 << 30)
        rel = os.path.relpath(os.path.abspath(f), SRC)
        with open(os.path.join(SRC, rel)) as fh:
            everything += [dict(m, tests=tests_for(rel, args, pairs))
                           for m in mutants_of(rel, fh.read(), ops) if lo <= m["line"] + 1 <= hi]
    rng = random.Random(args.seed)
    chosen = everything if len(everything) <= args.max else rng.sample(everything, args.max)
    everything, chosen = everything + again, chosen + again  # the reruns all run
    chosen.sort(key=lambda m: (m["file"], m["line"]))
    print(f"{len(everything)} mutants in {len(args.files)} file(s); running {len(chosen)} "
          f"(seed {args.seed})", flush=True)
    return chosen


def ledger_main(args):
    """--ledger, --equivalent, --killed: read or mark the ledger."""
    try:
        for kind in ("equivalent", "killed"):
            if getattr(args, kind):
                ident, reason = getattr(args, kind)
                full = mutate_ledger.mark(args.ledger_file, ident, kind, reason)
                print(f"{full} marked {kind}")
        if args.ledger is not None:
            roots = [os.path.relpath(p, SRC) if os.path.isabs(p) else os.path.normpath(p)
                     for p in args.ledger] or ["server", "worker/lib"]
            print(mutate_ledger.report(args.ledger_file, roots, SRC))
    except ValueError as e:
        print(f"mutate.py: {e}", file=sys.stderr)
        return 2
    return 0


def main():
    args = parse_args()
    if args.ledger is not None or args.equivalent or args.killed:
        return ledger_main(args)
    chosen = pick(args)
    if args.list:
        for m in chosen:
            print(f"  {m['file']}:{m['line'] + 1} {m['op']}: {m['new'].strip()}"
                  f"   [{m['tests'] or '-LE system'}]")
        return 0
    build = os.path.abspath(args.build)
    if not configure(build):
        return 1
    ok, out = build_tree(build, args.jobs)
    if not ok:
        print("the unmutated tree does not build:\n" + out[-3000:], file=sys.stderr)
        return 1
    suite = Suite(build)
    for m in chosen:
        m["entries"] = suite.select(m["tests"])
    bad, failed = test(suite, sorted({n for m in chosen for n in m["entries"]}), args, True)
    suite.save_times()
    if bad:
        print(f"the unmutated tree fails its tests ({', '.join(failed)}): fix that first",
              file=sys.stderr)
        return 1
    return run_mutants(chosen, suite, build, args)


def plant(m, pristine):
    """Write mutant m into its file (made from the pristine text)."""
    path = os.path.join(SRC, m["file"])
    if m["file"] not in pristine:
        with open(path) as fh:
            pristine[m["file"]] = fh.read()
    lines = pristine[m["file"]].split("\n")
    lines[m["line"]] = m["new"]
    with open(path, "w") as fh:
        fh.write("\n".join(lines))


def run_mutants(chosen, suite, build, args):
    """Each mutant in turn: plant, rebuild its tests' targets, run its
    tests, put the file back; then the summary and the JSON report."""
    pristine = {}

    def restore(*_):
        for path, text in pristine.items():
            with open(os.path.join(SRC, path), "w") as fh:
                fh.write(text)
        if _:
            sys.exit(130)
    signal.signal(signal.SIGINT, restore)
    signal.signal(signal.SIGTERM, restore)
    results = []
    t0 = time.time()
    commit = mutate_ledger.head_commit(SRC)
    for k, m in enumerate(chosen, 1):
        t1 = time.time()
        plant(m, pristine)
        try:
            ok, _ = build_tree(build, args.jobs,
                               None if args.all_targets else suite.targets_of(m["entries"]))
            if not ok:
                verdict, by = "stillborn", []
            else:
                bad, by = test(suite, m["entries"], args)
                verdict = "killed" if bad else "survived"
        finally:
            restore()
        m = dict(m, verdict=verdict, killed_by=by, seconds=round(time.time() - t1, 1))
        results.append(m)
        if not args.no_ledger:
            mutate_ledger.append(args.ledger_file, mutate_ledger.entry(
                m, verdict, m["entries"], by if verdict == "killed" else [], commit,
                m["seconds"]))
        print(f"[{k}/{len(chosen)}] {verdict:9} {m['file']}:{m['line'] + 1} {m['op']}"
              f"{' by ' + ', '.join(by) if by else ''} ({m['seconds']:.0f} s)", flush=True)
        if verdict == "survived":
            print(f"    - {m['old'].strip()}\n    + {m['new'].strip()}", flush=True)
    build_tree(build, args.jobs)  # the tree as it is again
    killed = sum(r["verdict"] == "killed" for r in results)
    survived = sum(r["verdict"] == "survived" for r in results)
    score = killed / (killed + survived) if killed + survived else 0.0
    print(f"\n{killed} killed, {survived} survived, "
          f"{sum(r['verdict'] == 'stillborn' for r in results)} stillborn: score "
          f"{100 * score:.1f} % ({time.time() - t0:.0f} s)")
    report = args.report or os.path.join(build, "mutants.json")
    with open(report, "w") as fh:
        json.dump({"seed": args.seed, "files": args.files, "tests": args.tests or "-LE system",
                   "killed": killed, "survived": survived, "score": score,
                   "mutants": results}, fh, indent=1)
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
