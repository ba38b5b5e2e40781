#!/usr/bin/python3
"""test_config_docs.py - the error examples of docs/configuration.md are true.

Each fenced block whose info string is `text config-error` is one example:
the lines of a cluster file, then `⇒ MESSAGE`. An optional first line
`# file: PATH` names the file the command is given instead of cluster.conf
(with no other lines, the file is not written: a missing file). Each file is
written in a fresh temporary folder and run there as
`zeps-server --config cluster.conf --shard 0`, with every
tcp://127.0.0.1:PORT of the file moved to a free port first (an example
that is wrongly accepted then binds no fixed port); the example holds if the
server exits 2 before opening a socket and one line of its stderr is
MESSAGE, after the program's name or log prefix ("zeps-server: MESSAGE").
Prints one line per example and "N passed, N failed"; exits 1 on a failure
or when the doc has fewer than 10 examples (the extraction broke).

usage: test_config_docs.py SOURCE_DIR BIN_DIR
"""
import pathlib
import re
import socket
import subprocess
import sys
import tempfile

SRC = pathlib.Path(sys.argv[1])
BIN = pathlib.Path(sys.argv[2]).resolve()
BLOCK = re.compile(r"^```text config-error\n(.*?)^```$", re.M | re.S)


def examples(text):
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        lines = m.group(1).splitlines()
        name = "cluster.conf"
        if lines and lines[0].startswith("# file: "):
            name = lines.pop(0)[len("# file: "):].strip()
        msgs = [ln[2:] for ln in lines if ln.startswith("⇒ ")]
        body = [ln for ln in lines if not ln.startswith("⇒ ")]
        yield line, name, body, msgs


def free_port(_match):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def holds(name, body, msg):
    """(ok, what happened) for one example."""
    text = re.sub(r"tcp://127\.0\.0\.1:\d+", free_port, "\n".join(body) + "\n")
    with tempfile.TemporaryDirectory(prefix="zeps-confdoc-") as d:
        if body:
            (pathlib.Path(d) / name).write_text(text)
        try:
            p = subprocess.run([str(BIN / "zeps-server"), "--config", name, "--shard", "0"],
                               cwd=d, capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return False, "zeps-server accepted the file and ran (killed after 10 s)"
    said = [ln for ln in p.stderr.splitlines()
            if ln == msg or ln.endswith(" " + msg) or ln.endswith(": " + msg)]
    if p.returncode == 2 and said:
        return True, ""
    return False, f"exit {p.returncode}, stderr: {p.stderr.strip()!r}"


def main():
    doc = SRC / "docs/configuration.md"
    passed = failed = n = 0
    for line, name, body, msgs in examples(doc.read_text()):
        n += 1
        if len(msgs) != 1:
            ok, why = False, f"{len(msgs)} '⇒' lines, want 1"
        else:
            ok, why = holds(name, body, msgs[0])
        where = f"docs/configuration.md:{line}"
        if ok:
            passed += 1
            print(f"ok   - {where}: {msgs[0]}")
        else:
            failed += 1
            print(f"FAIL - {where}: {msgs[0] if msgs else ''}\n       {why}")
    if n < 10:
        failed += 1
        print(f"FAIL - only {n} config-error examples found in {doc}: want at least 10")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
