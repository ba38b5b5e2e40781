#!/usr/bin/env python3
"""The layout rules of docs/architecture.md, checked on the built tree.

    check_layout.py SOURCE_DIR BUILD_DIR

1. No file over 700 lines and no function over 80 lines in the C sources
   (tests included).
2. No call cycle between the files of zeps-server, nor between the files
   of libzeps: from each object's undefined symbols and the symbols the
   other objects of the same library define (nm), a file-level call graph
   that must be acyclic.
3. zepsctl contains no server code and zeps-server no worker code: no
   symbol defined by an object of the other's library is in the binary.
4. No comparison of the consistency mode outside server/policy/.

Prints what it found, "N passed, N failed" and exits non-zero on a failure.
"""
import os
import re
import subprocess
import sys

MAX_FILE, MAX_FUNC = 700, 80


def git_files(src, *patterns):
    out = subprocess.run(["git", "-C", src, "ls-files", *patterns], capture_output=True,
                         text=True, check=True).stdout.split()
    return [f for f in out if os.path.exists(os.path.join(src, f))]


def long_things(src):
    bad = []
    for rel in git_files(src, "*.c", "*.h"):
        lines = open(os.path.join(src, rel), errors="replace").read().split("\n")
        if len(lines) - 1 > MAX_FILE:
            bad.append(f"{rel}: {len(lines) - 1} lines (> {MAX_FILE})")
        depth, start = 0, None
        for i, line in enumerate(lines):
            code = re.sub(r'"(\\.|[^"\\])*"', '""', line)
            code = re.sub(r"'(\\.|[^'\\])*'", "''", code).split("//")[0]
            if depth == 0 and code.startswith("{") and i > 0:
                start = i
            depth += code.count("{") - code.count("}")
            if depth == 0 and start is not None:
                if i - start + 1 > MAX_FUNC:
                    bad.append(f"{rel}:{start + 1}: a function of {i - start + 1} lines "
                               f"(> {MAX_FUNC})")
                start = None
    return bad


def objects(src, build, folder, target):
    """{source path: object path} of one CMake target in `folder`, for the
    sources that still exist (a build tree may hold objects of files since
    moved away)."""
    target_dir = os.path.join(build, folder, "CMakeFiles", target + ".dir")
    objs = {}
    for root, _, files in os.walk(target_dir):
        for f in files:
            if f.endswith(".c.o"):
                p = os.path.join(root, f)
                rel = os.path.join(folder, os.path.relpath(p, target_dir)[:-2])
                if os.path.exists(os.path.join(src, rel)):
                    objs[rel] = p
    return objs


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBR":
            defined.add(parts[2])
    return defined, undefined


def cycles(objs):
    syms = {f: symbols(o) for f, o in objs.items()}
    owner = {s: f for f, (d, _) in syms.items() for s in d}
    edges = {f: sorted({owner[s] for s in u if s in owner and owner[s] != f})
             for f, (_, u) in syms.items()}
    found, state = [], {}

    def visit(f, path):
        state[f] = 1
        for g in edges[f]:
            if state.get(g) == 1:
                found.append(" -> ".join(path[path.index(g):] + [g]))
            elif g not in state:
                visit(g, path + [g])
        state[f] = 2

    for f in sorted(edges):
        if f not in state:
            visit(f, [f])
    return found, syms


def foreign(binary, syms):
    out = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    have = {l.split()[-1] for l in out.splitlines() if len(l.split()) == 3}
    theirs = {s for d, _ in syms.values() for s in d if s.startswith("zp_")}
    return sorted(have & theirs)


def mode_checks(src):
    pat = re.compile(r'ZP_CONSISTENCY_[A-Z]|&zp_(bsp|async|ssp|weighted)_ops|->cons\s*[!=]=|'
                     r'strcmp\([^)]*consistency[^)]*"(bsp|ssp|async|weighted)"')
    bad = []
    for rel in git_files(src, "server/*.c", "server/*.h", "worker/*.c", "worker/*.h",
                         "common/*.c", "common/*.h"):
        if rel.startswith("server/policy/"):
            continue
        for n, line in enumerate(open(os.path.join(src, rel), errors="replace"), 1):
            if pat.search(line):
                bad.append(f"{rel}:{n}: {line.strip()}")
    return bad


def main():
    src, build = sys.argv[1], sys.argv[2]
    passed = failed = 0

    def check(what, problems):
        nonlocal passed, failed
        if problems:
            failed += 1
            print(f"FAIL - {what}:")
            for p in problems:
                print(f"         {p}")
        else:
            passed += 1
            print(f"ok   - {what}")

    check(f"no file over {MAX_FILE} lines, no function over {MAX_FUNC}", long_things(src))
    # the coordination layer (server/coord/) is its own library, linked
    # into zeps-server: its files are the server's for the cycle check
    server = {**objects(src, build, "server", "zeps_server_core"),
              **objects(src, build, "server", "zeps_coord")}
    client = objects(src, build, "worker/lib", "zeps_client_core")
    train = objects(src, build, "worker/train", "zeps_worker_core")
    for name, objs in (("zeps-server", server), ("libzeps", client)):
        found, syms = cycles(objs)
        check(f"no call cycle between the {len(objs)} files of {name}",
              found if len(objs) > 3 else [f"only {len(objs)} objects found"])
    _, ssyms = cycles(server)
    _, csyms = cycles(client)
    _, tsyms = cycles(train)
    check("zepsctl links no server code",
          foreign(os.path.join(build, "bin/zepsctl"), ssyms))
    check("zeps-server links no worker code (libzeps, zeps-worker)",
          foreign(os.path.join(build, "bin/zeps-server"), {**csyms, **tsyms}))
    check("no comparison of the consistency mode outside server/policy/", mode_checks(src))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
