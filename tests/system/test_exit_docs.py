#!/usr/bin/python3
"""test_exit_docs.py - the exit statuses are documented once, and truly.

docs/operations.md, "Exit status", is the one table of exit statuses; every
status common/exitcode.h defines has its row there (a row may name two),
and no row names a status the header does not define. The other pages
that speak of exit statuses (configuration.md, faults.md, commands.md)
point at that table; any "exits N" or "exit N" they still state for a
signal must agree with the header: 130 with SIGINT, 143 with SIGTERM (the
table's own row is read the same way). Prints one line per check and
"N passed, N failed"; exits 1 on a failure.

usage: test_exit_docs.py SOURCE_DIR
"""
import pathlib
import re
import sys

SRC = pathlib.Path(sys.argv[1])
passed = failed = 0


def check(what, ok, detail=""):
    global passed, failed
    print(("ok   - " if ok else "FAIL - ") + what + ("" if ok else f": {detail}"))
    passed, failed = passed + ok, failed + (not ok)


header = (SRC / "common/exitcode.h").read_text()
codes = {name: int(v) for name, v in re.findall(r"ZP_EXIT_(\w+)\s*=\s*(\d+)", header)}
check("common/exitcode.h defines the statuses", len(codes) >= 6, str(codes))

ops = (SRC / "docs/operations.md").read_text()
section = ops.split("## Exit status", 1)[1].split("\n## ", 1)[0]
rows = re.findall(r"^\| ([\d, ]+) \| (.*?) \|", section, re.M)
documented = {int(n) for first, _ in rows for n in first.split(",")}
check("every status of exitcode.h has a row in operations.md's table",
      set(codes.values()) <= documented, f"missing {set(codes.values()) - documented}")
check("the table names no status exitcode.h lacks", documented <= set(codes.values()),
      f"extra {documented - set(codes.values())}")

# a signal's status, wherever a page states one
SIG = {"SIGINT": codes.get("INTERRUPTED"), "SIGTERM": codes.get("STOPPED")}
pages = ["docs/configuration.md", "docs/faults.md", "docs/commands.md", "docs/operations.md",
         "docs/python.md", "README.md"]
for page in pages:
    text = (SRC / page).read_text()
    for m in re.finditer(r"(?:exits?|status)\s+(1[34]\d)\b([^.|]{0,80})", text):
        status, rest = int(m.group(1)), m.group(2)
        sigs = [s for s in SIG if s in rest]
        if len(sigs) == 1:
            check(f"{page}: '{m.group(0).strip()[:60]}' gives {sigs[0]} its status",
                  SIG[sigs[0]] == status, f"{sigs[0]} exits {SIG[sigs[0]]}, not {status}")
    for m in re.finditer(r"\b(1[34]\d)\b[^.|]{0,60}(SIGTERM/SIGINT|SIGINT/SIGTERM)", text):
        check(f"{page}: '{m.group(0)[:60]}' names one status for two signals", False,
              "SIGINT exits 130, SIGTERM 143")
    for m in re.finditer(r"(SIGINT|SIGTERM) \((1[34]\d)\)", text):
        check(f"{page}: '{m.group(0)}'", SIG[m.group(1)] == int(m.group(2)),
              f"{m.group(1)} exits {SIG[m.group(1)]}")

conf = (SRC / "docs/configuration.md").read_text()
check("configuration.md points at the one table", "operations.md`, \"Exit status\"" in conf)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
