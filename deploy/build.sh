#!/usr/bin/env bash
# Configure and build zeps into $ZEPS_BUILD_DIR (default: build/ in the
# source tree). Extra arguments go to cmake's configure step.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${ZEPS_BUILD_DIR:-$src/build}
# Configure only when the build tree is new or options are given: a
# configured tree re-runs cmake by itself when a CMakeLists.txt changes.
if [ ! -f "$build/CMakeCache.txt" ] || [ $# -gt 0 ]; then
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
fi
cmake --build "$build" -j"$(nproc)"
