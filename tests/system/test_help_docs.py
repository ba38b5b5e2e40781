#!/usr/bin/python3
"""test_help_docs.py - the options of every program agree with the docs.

Runs `--help` of zeps-server, zeps-worker and each zepsctl command (and of
each `zepsctl snapshot` subcommand) from the build tree, then checks:
  1. each --help exits 0 and prints its own usage line (`usage: zepsctl
     stats`, not another command's);
  2. the commands `zepsctl --help` lists are the commands checked here, and
     docs/commands.md has a section for each; its snapshot line names
     inspect, take and reshard; `zepsctl local --help` names every
     consistency mode zeps-server knows (from its refusal of an unknown one);
  3. every long option a --help prints is in that command's section of
     docs/commands.md, and every long option the section names is in the
     --help;
  4. every long option written after a command anywhere in docs/*.md and
     README.md (`zepsctl status --shard auto --endpoint ...`, in a code span
     or a code block line) is one that command's --help prints;
  5. the one-shot commands whose --help docs/operations.md says gives
     their exit statuses (keygen, gen-criteo, bench, study) print
     "Exit status:";
  6. every `ctest -R PATTERN` and every "ctest `NAME`" written there
     matches a test: one of this build tree (`ctest -N` in BIN_DIR/..) or
     one a tests/**/CMakeLists.txt declares by name (the tests of options
     this build left off, as ZooKeeper's).
Prints one line per check and "N passed, N failed"; exits 1 on a failure.

usage: test_help_docs.py SOURCE_DIR BIN_DIR
"""
import pathlib
import re
import subprocess
import sys
import tempfile

SRC = pathlib.Path(sys.argv[1])
BIN = pathlib.Path(sys.argv[2]).resolve()
OPT = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# command as the docs write it -> argv before --help, and its usage line
COMMANDS = {
    "zeps-server": (["zeps-server"], "usage: zeps-server"),
    "zeps-worker": (["zeps-worker"], "usage: zeps-worker"),
    "zepsctl local": (["zepsctl", "local"], "usage: zepsctl local"),
    "zepsctl status": (["zepsctl", "status"], "usage: zepsctl status"),
    "zepsctl stats": (["zepsctl", "stats"], "usage: zepsctl stats"),
    "zepsctl bench": (["zepsctl", "bench"], "usage: zepsctl bench"),
    "zepsctl study": (["zepsctl", "study"], "usage: zepsctl study"),
    "zepsctl scale": (["zepsctl", "scale"], "usage: zepsctl scale"),
    "zepsctl snapshot": (["zepsctl", "snapshot"], "usage: zepsctl snapshot"),
    "zepsctl gen-criteo": (["zepsctl", "gen-criteo"], "usage: zepsctl gen-criteo"),
    "zepsctl keygen": (["zepsctl", "keygen"], "usage: zepsctl keygen"),
    "zepsctl evict": (["zepsctl", "evict"], "usage: zepsctl evict"),
    "zepsctl shards": (["zepsctl", "shards", "move"], "usage: zepsctl shards move"),
    "zepsctl version": (["zepsctl", "version"], "zepsctl "),
}
SUBCOMMANDS = [["zepsctl", "snapshot", s] for s in ("inspect", "take", "reshard")]
# `zepsctl shards` is checked through `shards move`; its other subcommands'
# options count for it too (not `add`: its text quotes zeps-server's)
SHARDS_SUBCOMMANDS = [["zepsctl", "shards", s] for s in ("rebalance", "remove", "retire", "resolve")]

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   - {what}")
    else:
        failed += 1
        print(f"FAIL - {what}{': ' + detail if detail else ''}")


def run_help(argv):
    p = subprocess.run([str(BIN / argv[0])] + argv[1:] + ["--help"], capture_output=True,
                       text=True, timeout=30)
    return p.returncode, p.stdout


def options(text):
    return set(OPT.findall(text)) - {"--help"}


def server_modes():
    """The consistency modes zeps-server knows, from its own refusal."""
    with tempfile.TemporaryDirectory(prefix="zeps-helpdoc-") as d:
        conf = pathlib.Path(d) / "c.conf"
        conf.write_text('cluster = { servers = ["ipc://%s/s"]; workers = 1; '
                        'consistency = "nosuchmode"; };\n' % d)
        p = subprocess.run([str(BIN / "zeps-server"), "--config", str(conf), "--shard", "0"],
                           capture_output=True, text=True, timeout=30)
    m = re.search(r"is not one of ([a-z_, ]+)", p.stderr)
    return m.group(1).split(", ") if m else []


def doc_sections():
    """docs/commands.md: '## `command`' -> the text of its section."""
    text = (SRC / "docs/commands.md").read_text()
    parts = re.split(r"^## `([^`]+)`\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def mentions(helps):
    """(file:line, command, option) for options written after a command."""
    names = sorted(COMMANDS, key=len, reverse=True)
    cmd_re = re.compile(r"(?<![\w/-])(?:[\w./]*/)?(" + "|".join(map(re.escape, names)) +
                        r")(?![\w-])")
    files = sorted((SRC / "docs").glob("*.md")) + [SRC / "README.md"]
    for f in files:
        in_block = False
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if line.startswith("```"):
                in_block = not in_block
                continue
            for m in cmd_re.finditer(line):
                rest = line[m.end():]
                if not in_block:  # a code span ends at its backtick
                    rest = rest.split("`", 1)[0]
                # the next command on the line starts its own options
                nxt = cmd_re.search(rest)
                rest = rest[:nxt.start()] if nxt else rest
                rest = re.split(r"[|;&#]", rest, 1)[0]  # a pipe, list or comment ends it
                for o in OPT.findall(rest):
                    yield f"{f.relative_to(SRC)}:{n}", m.group(1), o


def ctest_names():
    """Every test of the build tree BIN lies in, and every one declared by name."""
    try:
        p = subprocess.run(["ctest", "-N"], cwd=BIN.parent, capture_output=True, text=True,
                           timeout=60)
        names = set(re.findall(r"^\s*Test\s+#\d+: (\S+)", p.stdout, flags=re.M))
    except FileNotFoundError:  # no ctest on PATH: the declared names still count
        names = set()
    decl = r"(?:zeps_(?:check|shell)_test\(|add_test\(NAME )"
    for f in (SRC / "tests").rglob("CMakeLists.txt"):
        text = f.read_text()
        names |= set(re.findall(decl + r"(\w+)", text))
        # foreach(mode a b c) zeps_shell_test(faults_${mode} ...) endforeach()
        for var, values, body in re.findall(r"foreach\((\w+) ([^)]*)\)(.*?)endforeach", text, re.S):
            for pre, post in re.findall(decl + r"(\w*)\$\{" + var + r"\}(\w*)", body):
                names |= {pre + v + post for v in values.split()}
    return sorted(names)


def ctest_mentions():
    """(file:line, pattern) for each `ctest -R PATTERN` and ctest `NAME` of the docs."""
    files = sorted((SRC / "docs").glob("*.md")) + [SRC / "README.md"]
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            where = f"{f.relative_to(SRC)}:{n}"
            for m in re.finditer(r"ctest -R '([^']+)'|ctest -R \"([^\"]+)\"|ctest -R ([^\s`'\")]+)",
                                 line):
                # a markdown table writes | as \|
                yield where, (m.group(1) or m.group(2) or m.group(3)).replace("\\|", "|")
            for m in re.finditer(r"ctest `([a-z_0-9]+)`", line):
                yield where, "^" + m.group(1) + "$"


def main():
    helps = {}
    for name, (argv, usage) in COMMANDS.items():
        rc, out = run_help(argv)
        if name in ("zepsctl keygen", "zepsctl gen-criteo", "zepsctl bench", "zepsctl study"):
            check("Exit status:" in out, f"`{name} --help` gives its exit statuses "
                  "(docs/operations.md, \"Exit status\", says it does)")
        check(rc == 0 and out.startswith(usage), f"`{name} --help` exits 0 with '{usage}'",
              f"exit {rc}, first line '{out.splitlines()[0] if out else ''}'")
        helps[name] = options(out)
    for argv in SUBCOMMANDS:
        rc, out = run_help(argv)
        check(rc == 0 and out.startswith("usage: zepsctl snapshot"),
              f"`{' '.join(argv)} --help` exits 0 with the snapshot usage", f"exit {rc}")
        helps["zepsctl snapshot"] |= options(out)
    for argv in SHARDS_SUBCOMMANDS:
        rc, out = run_help(argv)
        usage = "usage: " + " ".join(argv)
        check(rc == 0 and out.startswith(usage), f"`{' '.join(argv)} --help` exits 0 with '{usage}'",
              f"exit {rc}")
        helps["zepsctl shards"] |= options(out)

    rc, out = run_help(["zepsctl"])
    listed = set(re.findall(r"^  ([a-z][a-z-]+) ", out, flags=re.M))
    ours = {n.split()[1] for n in COMMANDS if n.startswith("zepsctl ")}
    check(listed == ours, "`zepsctl --help` lists exactly the commands checked here",
          f"listed only: {sorted(listed - ours)}, checked only: {sorted(ours - listed)}")

    snap = re.search(r"^  snapshot (.*)$", out, flags=re.M)
    check(snap and all(w in snap.group(1) for w in ("inspect", "take", "reshard")),
          "`zepsctl --help` names snapshot inspect, take and reshard",
          snap.group(0) if snap else "no snapshot line")
    modes = server_modes()
    _, local_help = run_help(["zepsctl", "local"])
    check(len(modes) >= 4 and all(re.search(r"\b" + m + r"\b", local_help) for m in modes),
          f"`zepsctl local --help` names every mode zeps-server has ({', '.join(modes)})")

    sections = doc_sections()
    for name, opts in helps.items():
        if name not in sections:
            check(False, f"docs/commands.md has a section '## `{name}`'")
            continue
        documented = options(sections[name])
        check(opts <= documented, f"every option of `{name} --help` is in docs/commands.md",
              f"missing: {sorted(opts - documented)}")
        check(documented <= opts, f"every option docs/commands.md gives `{name}` is in its --help",
              f"not in --help: {sorted(documented - opts)}")
    extra = set(sections) - set(helps)
    check(not extra, "docs/commands.md has no section for a command that does not exist",
          f"{sorted(extra)}")

    seen = list(mentions(helps))
    wrong = [f"{w}: {cmd} {o}" for w, cmd, o in seen if o not in helps[cmd] | {"--help"}]
    check(not wrong and len(seen) > 50,
          f"all {len(seen)} options written after a command in docs/*.md and README.md exist",
          "\n       ".join(wrong) if wrong else "too few found: the scan is broken")

    tests = ctest_names()
    said = list(ctest_mentions())
    bad = [f"{w}: {pat}" for w, pat in said if not any(re.search(pat, t) for t in tests)]
    check(not bad and len(said) > 20 and len(tests) > 50,
          f"all {len(said)} ctest patterns of docs/*.md and README.md match one of the "
          f"{len(tests)} tests", "\n       ".join(bad) if bad else "too few found: the scan is broken")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
