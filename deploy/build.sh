#!/usr/bin/env bash
# Configure and build zeps into $ZEPS_BUILD_DIR (default: build/ in the
# source tree). Extra arguments go to cmake's configure step.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${ZEPS_BUILD_DIR:-$src/build}
# Configure only when the build tree is new or options are given: a
# configured tree re-runs cmake by itself when a CMakeLists.txt changes. A
# new tree without options builds what the main jobs run (the daemons,
# zepsctl, libzeps): the tests and the Python package need the `tests` and
# `python` groups of install-deps.sh, and tests/run.sh asks for them.
if [ ! -f "$build/CMakeCache.txt" ] && [ $# -eq 0 ]; then
    set -- -DZEPS_TESTS=OFF -DZEPS_PYTHON=OFF
fi
if [ ! -f "$build/CMakeCache.txt" ] || [ $# -gt 0 ]; then
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
fi
cmake --build "$build" -j"$(nproc)"
