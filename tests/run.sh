#!/usr/bin/env bash
# The test command: install what is missing (install-deps.sh tests: what the
# main job needs and what only the tests use), build, run the whole suite
# (unit tests and multi-process tests) with ctest. With ZEPS_TEST_ASAN=1 (the
# default under CI=true) the suite runs a second time in an
# AddressSanitizer/UBSan build, without the tests labelled `system` (whole
# training jobs under Slurm, network namespaces, crash runs: they exercise
# deployment and processes, not new code paths, and would double CI time).
# In that case it also builds the daemons, tools and library in Release
# with -Werror (build-release/: a build check, gcc -O3 warns where -O2 does
# not), and builds the libFuzzer targets with clang into
# build-fuzz/ (-DZEPS_FUZZ=ON) and runs each for ZEPS_FUZZ_SECONDS (20) on
# its seed corpus (ctest label `fuzz`, tests/fuzz).
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$src/deploy/install-deps.sh" tests
jobs=$(nproc)
export OPENBLAS_NUM_THREADS=1

run_suite() { # build-dir "ctest-args" cmake-args...
    local dir=$1 ctest_args=$2
    shift 2
    echo "== build $dir $*"
    ZEPS_BUILD_DIR=$dir bash "$src/deploy/build.sh" -DZEPS_WERROR=ON -DZEPS_TESTS=ON \
        -DZEPS_PYTHON=ON "$@" >/dev/null
    echo "== test $dir"
    # shellcheck disable=SC2086
    (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 900 $ctest_args)
}

start=$(date +%s)
run_suite "${ZEPS_BUILD_DIR:-$src/build}" ""
asan=${ZEPS_TEST_ASAN:-${CI:+1}}
if [ "${asan:-0}" = 1 ]; then
    run_suite "$src/build-asan" "-LE system" -DZEPS_ASAN=ON -DCMAKE_BUILD_TYPE=Debug
    # a build check: the daemons, tools and library build warning-free in
    # Release too (gcc -O3 sees other "may be used uninitialized" paths)
    echo "== build $src/build-release (Release, -Werror)"
    cmake -S "$src" -B "$src/build-release" -DCMAKE_BUILD_TYPE=Release -DZEPS_WERROR=ON \
        -DZEPS_TESTS=OFF -DZEPS_PYTHON=OFF >/dev/null
    cmake --build "$src/build-release" -j"$jobs" >/dev/null
    fuzz=$src/build-fuzz
    echo "== build $fuzz (clang, libFuzzer, ASan/UBSan)"
    cmake -S "$src" -B "$fuzz" -DCMAKE_C_COMPILER=clang -DZEPS_FUZZ=ON -DZEPS_TESTS=OFF \
        -DZEPS_PYTHON=OFF -DZEPS_FUZZ_SECONDS="${ZEPS_FUZZ_SECONDS:-20}" >/dev/null
    cmake --build "$fuzz" --target zeps_fuzz -j"$jobs" >/dev/null
    echo "== fuzz $fuzz"
    (cd "$fuzz" && ctest --output-on-failure -j"$jobs" -L fuzz)
fi
echo "== all tests passed in $(($(date +%s) - start)) s"
