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

  tests/mutate.py FILE...                 mutants of these files
  tests/mutate.py --since REV             of the C files of server/, worker/lib/,
                                          common/ changed since REV
  options: --max N (mutants in all, a seeded sample when there are more;
  default 40), --seed S, --ops cmp-flip,logic,... (default all), --tests
  REGEX (ctest -R; default: every entry but label system), --jobs J
  (ctest -j, default 2), --test-timeout S (per test, default 300),
  --report FILE (JSON; default <build>/mutants.json), --lines A-B (only
  these lines), --list (print the mutants, build and run nothing)

Prints one line per mutant and a summary: killed / (killed + survived) is the
score. Each survivor is printed with its diff: kill it with a test that
fails on it, or write down why it is equivalent (docs/testing.md).
Exits 0 when it ran (whatever the score), 2 on bad usage.
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

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
            for m in re.finditer(r"([<>]=?|==)\s*(\d+)\b(?![.\w])", s):
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


def build_tree(build, jobs):
    rc, out = run(["cmake", "--build", build, "-j", str(jobs)], 1800)
    return rc == 0, out


def test(build, args):
    cmd = ["ctest", "--stop-on-failure", "-j", str(args.jobs), "--timeout",
           str(args.test_timeout)]
    cmd += ["-R", args.tests] if args.tests else ["-LE", "system"]
    rc, out = run(cmd, args.test_timeout * 4 + 600, cwd=build,
                  env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    failed = [f"{n} ({why})" for n, why in re.findall(r"^\s*\d+ - (\S+) \(([^)]*)\)", out, re.M)
              if why != "Not Run"]
    return rc, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--since")
    ap.add_argument("--max", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", default="cmp-flip,cmp-edge,bound,logic,drop-assign,drop-call,"
                                     "swap-args,zero-offset")
    ap.add_argument("--tests")
    ap.add_argument("--lines", help="A-B: only mutants of these lines (1-based, with one file)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--test-timeout", type=int, default=300)
    ap.add_argument("--build", default=os.path.join(SRC, "build-mutate"))
    ap.add_argument("--report")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    files = list(args.files)
    if args.since:
        files += changed_since(args.since)
    if not files:
        ap.error("name files, or --since REV")
    ops = set(args.ops.split(","))
    lo, hi = (int(x) for x in args.lines.split("-")) if args.lines else (1, 1 << 30)
    everything = []
    for f in files:
        rel = os.path.relpath(os.path.abspath(f), SRC)
        with open(os.path.join(SRC, rel)) as fh:
            everything += [m for m in mutants_of(rel, fh.read(), ops) if lo <= m["line"] + 1 <= hi]
    rng = random.Random(args.seed)
    chosen = everything if len(everything) <= args.max else rng.sample(everything, args.max)
    chosen.sort(key=lambda m: (m["file"], m["line"]))
    print(f"{len(everything)} mutants in {len(files)} file(s); running {len(chosen)} "
          f"(seed {args.seed})", flush=True)
    if args.list:
        for m in chosen:
            print(f"  {m['file']}:{m['line'] + 1} {m['op']}: {m['new'].strip()}")
        return 0
    build = os.path.abspath(args.build)
    if not configure(build):
        return 1
    ok, out = build_tree(build, args.jobs)
    if not ok:
        print("the unmutated tree does not build:\n" + out[-3000:], file=sys.stderr)
        return 1
    rc, failed = test(build, args)
    if rc != 0:
        print(f"the unmutated tree fails its tests ({', '.join(failed)}): fix that first",
              file=sys.stderr)
        return 1

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
    for k, m in enumerate(chosen, 1):
        path = os.path.join(SRC, m["file"])
        if m["file"] not in pristine:
            with open(path) as fh:
                pristine[m["file"]] = fh.read()
        lines = pristine[m["file"]].split("\n")
        lines[m["line"]] = m["new"]
        with open(path, "w") as fh:
            fh.write("\n".join(lines))
        try:
            ok, _ = build_tree(build, args.jobs)
            if not ok:
                verdict, by = "stillborn", []
            else:
                rc, by = test(build, args)
                verdict = "killed" if rc != 0 else "survived"
        finally:
            with open(path, "w") as fh:
                fh.write(pristine[m["file"]])
        m = dict(m, verdict=verdict, killed_by=by)
        results.append(m)
        print(f"[{k}/{len(chosen)}] {verdict:9} {m['file']}:{m['line'] + 1} {m['op']}"
              f"{' by ' + ', '.join(by) if by else ''}", flush=True)
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
        json.dump({"seed": args.seed, "files": files, "tests": args.tests or "-LE system",
                   "killed": killed, "survived": survived, "score": score,
                   "mutants": results}, fh, indent=1)
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
