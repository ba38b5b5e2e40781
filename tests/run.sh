#!/usr/bin/env bash
# The test command: install what is missing, build, run the whole suite
# (unit tests and multi-process tests) with ctest. With ZEPS_TEST_ASAN=1 (the
# default under CI=true) the suite runs a second time in an
# AddressSanitizer/UBSan build.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$src/deploy/install-deps.sh"
jobs=$(nproc)
export OPENBLAS_NUM_THREADS=1

run_suite() { # build-dir cmake-args...
    local dir=$1
    shift
    echo "== build $dir $*"
    ZEPS_BUILD_DIR=$dir bash "$src/deploy/build.sh" -DZEPS_WERROR=ON "$@" >/dev/null
    echo "== test $dir"
    (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 600)
}

run_suite "${ZEPS_BUILD_DIR:-$src/build}"
asan=${ZEPS_TEST_ASAN:-${CI:+1}}
if [ "${asan:-0}" = 1 ]; then
    run_suite "$src/build-asan" -DZEPS_ASAN=ON -DCMAKE_BUILD_TYPE=Debug
fi
