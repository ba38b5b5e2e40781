#!/usr/bin/env bash
# tests/coverage.sh - branch (and line) coverage of the test suite, per
# folder, with gcovr (docs/testing.md, "Coverage"). Installs what it needs
# (bash deploy/install-deps.sh tests coverage), builds an instrumented tree
# into build-cov/ (--coverage, -O0), runs every ctest entry but the `system`
# label (the whole-job tests exercise deployment, not code paths; and
# slower -O0 binaries would stretch their timings), and prints one summary
# per folder (common, server, worker/lib, worker/train, worker/ctl) and in
# all; an HTML report goes to build-cov/coverage/index.html.
#   env: ZEPS_COV_DIR (default build-cov), ZEPS_COV_TESTS (ctest -R, default
#   all but label system)
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$src/deploy/install-deps.sh" tests coverage
dir=${ZEPS_COV_DIR:-$src/build-cov}
cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DZEPS_TESTS=ON -DZEPS_PYTHON=ON \
    -DCMAKE_C_FLAGS="--coverage -O0" -DCMAKE_EXE_LINKER_FLAGS=--coverage \
    -DCMAKE_SHARED_LINKER_FLAGS=--coverage >/dev/null
cmake --build "$dir" -j"$(nproc)" >/dev/null
find "$dir" -name '*.gcda' -delete
export OPENBLAS_NUM_THREADS=1
if [ -n "${ZEPS_COV_TESTS:-}" ]; then sel=(-R "$ZEPS_COV_TESTS"); else sel=(-LE system); fi
(cd "$dir" && ctest -j"$(nproc)" --timeout 1200 "${sel[@]}" | grep -E "tests passed|\(Failed\)|Skipped") || true
mkdir -p "$dir/coverage"
for f in common server worker/lib worker/train worker/ctl; do
    echo "== $f"
    gcovr -r "$src" "$dir" --filter "$src/$f/" --print-summary -o /dev/null 2>/dev/null | tail -3
done
echo "== all of common, server, worker"
gcovr -r "$src" "$dir" --filter "$src/common/" --filter "$src/server/" --filter "$src/worker/" \
    --exclude "$src/worker/python/" --html-details "$dir/coverage/index.html" --print-summary \
    -o /dev/null 2>/dev/null | tail -3
echo "HTML: $dir/coverage/index.html"
