#!/usr/bin/env bash
# test_readme.sh - the README's "Running by hand" block, run as written:
# the first ```sh block under that heading, with build/bin/ pointing at the
# build tree and, for time, --epochs 1 --max-train-examples 2000 added to
# `zepsctl local --print-config`. Checks that every command exits 0, that
# status and stats answered for both shards, that every worker wrote
# results/worker-<rank>.json and that both shards stopped cleanly.
# Prints "N passed, N failed" at the end; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-readme-XXXXXX)
runner=
cleanup() { # the block's shell leads its own process group: end it all
    [ -n "$runner" ] && kill -TERM -- "-$runner" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# the block: from "## Running by hand" to the first closing fence
awk '/^## Running by hand/ {inside = 1; next}
     inside && /^```sh/ {copy = 1; next}
     copy && /^```/ {exit}
     copy {print}' "$SRC/README.md" >"$work/block.sh"
check "README has a 'Running by hand' block of 8 commands" test "$(grep -c . "$work/block.sh")" -eq 8
check "the block starts from zepsctl local --print-config" \
    grep -q "^build/bin/zepsctl local --print-config > cluster.conf" "$work/block.sh"

# each line runs in the same shell (so %N jobs work) and logs its status
{
    echo "set -u"
    while IFS= read -r line; do
        line=${line//build\/bin\//$BIN/}
        line=${line/--print-config/--print-config --epochs 1 --max-train-examples 2000}
        printf '%s\necho "exit $? of: %s" >>steps.log\n' "$line" "${line//\"/\\\"}"
    done <"$work/block.sh"
    echo "wait"
} >"$work/run.sh"
(cd "$work" && exec setsid bash run.sh >out.log 2>&1) &
runner=$!
timeout_s=600
for _ in $(seq $((timeout_s * 10))); do kill -0 "$runner" 2>/dev/null || break; sleep 0.1; done
kill -0 "$runner" 2>/dev/null && kill -TERM -- "-$runner"
wait "$runner"
check "the block ran to its end within ${timeout_s} s" test $? -eq 0
runner=
check "every command exited 0" test "$(grep -c '^exit 0 of' "$work/steps.log")" -eq 8
grep -v '^exit 0 of' "$work/steps.log"
check "cluster.conf names a result_dir" grep -q 'result_dir = "results"' "$work/cluster.conf"
check "status answered for shard 0 and 1" \
    bash -c "grep -q 'shard 0' '$work/out.log' && grep -q 'shard 1' '$work/out.log'"
for r in 0 1 2 3; do
    check "worker $r wrote results/worker-$r.json" test -s "$work/results/worker-$r.json"
done
check "rank 0 evaluated the model" grep -q '"final_accuracy":0\.[0-9]' "$work/results/worker-0.json"
check "both shards stopped on SIGTERM" test "$(grep -c 'stopped$' "$work/out.log")" -eq 2
[ "$fail" -eq 0 ] || tail -30 "$work/out.log"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
