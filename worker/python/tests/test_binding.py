"""The binding declares exactly what libzeps exports: every zeps_ function
of libzeps.so is in build_ffi.py's cdef (so a function added to zeps.h and
the library cannot be forgotten here), and nothing in the cdef is missing
from the library."""
import os
import re
import subprocess
import sys

import zeps._native  # noqa: F401  (loads the libzeps.so it links)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import build_ffi  # noqa: E402


def loaded_libzeps():
    with open("/proc/self/maps") as f:
        for line in f:
            if "libzeps.so" in line:
                return line.split()[-1]
    raise AssertionError("libzeps.so is not loaded")


def test_cdef_matches_the_library():
    out = subprocess.run(["nm", "-D", "--defined-only", loaded_libzeps()], capture_output=True,
                         text=True, check=True).stdout
    exported = {l.split()[-1] for l in out.splitlines() if l.split()[-2:-1] == ["T"]}
    exported = {s for s in exported if s.startswith("zeps_")}
    declared = set(re.findall(r"\b(zeps_[a-z0-9_]+)\s*\(", build_ffi.CDEF))
    assert exported, "no zeps_ symbol exported?"
    assert exported - declared == set(), "exported but not declared for Python"
    assert declared - exported == set(), "declared for Python but not exported"
