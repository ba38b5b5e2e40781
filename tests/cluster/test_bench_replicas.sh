#!/usr/bin/env bash
# test_bench_replicas.sh - `zepsctl bench --replicas 2` (docs/commands.md,
# docs/performance.md "Replication"): with a tiny size set and one
# repetition it starts a ZooKeeper and a shard of two replicas beside the
# plain shard, measures the "zeps r=2" cell beside the "zeps" cell, prints
# the r=2 / r=1 table (push, pull, push round trip p50/p99) and the sparse
# push rows, writes them into the JSON, and leaves nothing running and no
# temporary folder; interrupted (SIGINT) it stops everything too; a replica
# count other than 1 or 2, and --log-mb without it, are refused; without
# --replicas no replicated shard runs; with --only one side the other's columns
# say "-". Prints "N passed, N failed"; exits non-zero on a failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-benchr-XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; rm -rf "$work"' EXIT
export TMPDIR=$work # the bench's own folder goes in here

# What still runs from this test's folder (the bench's servers and
# ZooKeeper all name a file in it on their command lines).
left() { pgrep -f -- "$work/zeps-bench-" || true; }
no_folder() { [ -z "$(ls -d "$work"/zeps-bench-* 2>/dev/null)" ]; }
# Wait up to 10 s for the bench's children to be gone.
gone() {
    for _ in $(seq 100); do
        [ -z "$(left)" ] && return 0
        sleep 0.1
    done
    echo "still running: $(left | tr '\n' ' ')"
    return 1
}

t0=$SECONDS
"$BIN/zepsctl" bench --replicas 2 --log-mb 16 --sizes 64 --reps 1 --seconds 0.1 \
    --json "$work/r2.json" >"$work/r2.out" 2>"$work/r2.err"
rc=$?
echo "zepsctl bench --replicas 2 took $((SECONDS - t0)) s"
check "exits 0" test "$rc" -eq 0 || tail -20 "$work/r2.err"
check "started ZooKeeper and the replicated shard" \
    grep -q "replicated shard ready after .*2 in sync" "$work/r2.err"
check "measured the zeps r=2 cell beside zeps" \
    bash -c "grep -q '64 B push zeps \.\.\.' '$work/r2.err' &&
             grep -q '64 B push zeps r=2 \.\.\.' '$work/r2.err' &&
             grep -q '64 B rtt zeps r=2 \.\.\.' '$work/r2.err'"
check "prints the r=2 / r=1 table" grep -q "^replicated shard (2 replicas, acks=all)" "$work/r2.out"
check "prints the 64 B round-trip ratios" \
    grep -Eq "64 B push round trip: p50 [0-9.]+, p99 [0-9.]+" "$work/r2.out"
check "prints the sparse push rows" grep -Eq "D=64 +\| r=1 +[0-9]+ \| r=2 +[0-9]+ \| ratio" \
    "$work/r2.out"
check "JSON: the r=2 cell and its ratios" \
    bash -c "grep -q '\"zeps_r2\": {\"push_MBps\"' '$work/r2.json' &&
             grep -q '\"ratio_r2\": {\"push\"' '$work/r2.json' &&
             grep -q '\"sparse_push\"' '$work/r2.json'"
r=$(json_num "$work/r2.json" push_rtt_p50)
check "JSON: a positive p50 round-trip ratio ($r)" awk -v r="$r" 'BEGIN { exit !(r > 0) }'
if [ -x /usr/bin/python3 ]; then
    check "JSON parses" /usr/bin/python3 -c "import json, sys; json.load(open(sys.argv[1]))" \
        "$work/r2.json"
fi
check "nothing left running" gone
check "its folder removed" no_folder

# Interrupted while measuring: everything it started is stopped.
"$BIN/zepsctl" bench --replicas 2 --sizes 64 --reps 50 --seconds 0.2 \
    >"$work/int.out" 2>"$work/int.err" &
pid=$!
wait_for "$work/int.err" "zeps r=2 \.\.\." 30
kill -INT "$pid"
wait "$pid"
rc=$?
pid=
check "SIGINT: exits non-zero, saying so" \
    bash -c "[ $rc -ne 0 ] && grep -q interrupted '$work/int.err'"
check "SIGINT: nothing left running" gone
check "SIGINT: its folder removed" no_folder

"$BIN/zepsctl" bench --replicas 3 --sizes 64 >"$work/bad.out" 2>&1
check "--replicas 3 refused (exit 2)" test $? -eq 2
"$BIN/zepsctl" bench --log-mb 16 --sizes 64 >"$work/bad.out" 2>&1
check "--log-mb without --replicas 2 refused (exit 2)" test $? -eq 2

# Without --replicas nothing of it runs.
"$BIN/zepsctl" bench --sizes 64 --reps 1 --seconds 0.05 --json "$work/r1.json" \
    >"$work/r1.out" 2>"$work/r1.err"
check "without --replicas: exits 0" test $? -eq 0
check "without --replicas: no ZooKeeper, no r=2 cell" \
    bash -c "! grep -q -e ZooKeeper -e 'r=2' '$work/r1.err' '$work/r1.out' &&
             ! grep -q zeps_r2 '$work/r1.json'"

# --only raw: the zeps columns say "-" (not measured), and no zeps / raw
# ratio is printed; the raw columns hold figures.
"$BIN/zepsctl" bench --only raw --sizes 64 --reps 1 --seconds 0.05 >"$work/raw.out" 2>"$work/raw.err"
check "--only raw: exits 0" test $? -eq 0
check "--only raw: zeps columns '-', raw ones measured" \
    grep -Eq "^ +64 B \| +- +[0-9.]+ +- \|" "$work/raw.out"
check "--only raw: no zeps / raw ratio" bash -c "! grep -q 'push zeps / raw' '$work/raw.out'"
"$BIN/zepsctl" bench --only zeps --sizes 64 --reps 1 --seconds 0.05 >"$work/z.out" 2>"$work/z.err"
check "--only zeps: raw columns '-'" grep -Eq "^ +64 B \| +[0-9.]+ +- +- \|" "$work/z.out"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
