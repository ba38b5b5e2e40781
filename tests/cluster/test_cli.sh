#!/usr/bin/env bash
# test_cli.sh - the command-line programs with real processes:
#   zepsctl local trains and summarises; a killed worker is reported by name
#   and nothing is left running; bad cluster files are refused before any
#   socket opens (file, line, key, exit 2); zepsctl status reads a live
#   cluster and fails for a dead shard.
# Prints "N passed, N failed" at the end; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-cli-XXXXXX)
cleanup() {
    pkill -TERM -f "$work" 2>/dev/null
    sleep 0.2
    pkill -KILL -f "$work" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
[ -n "${ZEPS_TEST_KEEP:-}" ] && trap - EXIT

no_leftovers() {
    ! pgrep -f "$1" >/dev/null
}

# 1. A small real training run through the launcher.
"$BIN/zepsctl" local -q --dir "$work/run1" --model softmax --epochs 2 --batch 32 \
    --max-train-examples 8000 --servers 2 --workers 2 >"$work/run1.out" 2>&1
rc=$?
check "zepsctl local exits 0" test $rc -eq 0
check "summary names the final accuracy" grep -q "final test accuracy" "$work/run1.out"
sum="$work/run1/summary.json"
check "summary JSON written" test -s "$sum"
acc=$(json_num "$sum" final_accuracy)
check "softmax learnt (accuracy $acc > 0.70)" awk -v a="${acc:-0}" 'BEGIN{exit !(a > 0.70)}'
check "no process left after a clean run" no_leftovers "$work/run1"

# 2. A worker killed mid-run: the launcher names it, stops the rest, exits 1.
"$BIN/zepsctl" local -q --dir "$work/run2" --model mlp --epochs 50 --batch 32 \
    --max-train-examples 20000 --servers 2 --workers 2 >"$work/run2.out" 2>&1 &
launcher=$!
# kill rank 1 once both workers are training (data loaded, steps running),
# so worker 0 is inside its training loop when the launcher stops it
for _ in $(seq 600); do
    victim=$(pgrep -f "zeps-worker.*$work/run2.*--rank 1" | head -1)
    if [ -n "$victim" ] && grep -qs "training mlp" "$work/run2/worker-0.log" &&
        grep -qs "training mlp" "$work/run2/worker-1.log"; then
        break
    fi
    sleep 0.1
done
[ -n "${victim:-}" ] && kill -KILL "$victim"
wait $launcher
rc=$?
check "launcher exits 1 when a worker dies (got $rc)" test $rc -eq 1
check "launcher names the dead worker" grep -q "worker 1" "$work/run2.out"
check "no process left after a failure" no_leftovers "$work/run2"
check "a failed run still writes summary.json with its outcome" \
    grep -q '"outcome": "failed"' "$work/run2/summary.json"
check "the worker stopped by the launcher wrote its result" \
    grep -q '"stopped":true' "$work/run2/worker-0.json"

check "the servers of a failed run, stopped by the launcher, count as stopped cleanly" \
    grep -q '"servers_stopped_cleanly": true' "$work/run2/summary.json"

# 2b. Ctrl-C to the launcher: everything stops, exit 130, and the summary
# says the servers stopped cleanly (they exit 0 on SIGTERM).
"$BIN/zepsctl" local -q --dir "$work/run2b" --model mlp --epochs 50 --batch 32 \
    --max-train-examples 20000 --servers 2 --workers 2 >"$work/run2b.out" 2>&1 &
launcher=$!
for _ in $(seq 600); do
    grep -qs "training mlp" "$work/run2b/worker-1.log" && break
    sleep 0.1
done
kill -INT $launcher
wait $launcher
rc=$?
check "launcher exits 130 on SIGINT (got $rc)" test $rc -eq 130
check "after SIGINT summary.json says the servers stopped cleanly" \
    grep -q '"servers_stopped_cleanly": true' "$work/run2b/summary.json"
check "after SIGINT summary.json says how the run ended" \
    grep -q '"outcome": "signal"' "$work/run2b/summary.json"
check "no process left after SIGINT" no_leftovers "$work/run2b"

# 2c. A shard bound as tcp://localhost:PORT (ZeroMQ binds addresses, not host
# names: the server binds 127.0.0.1) serves; status reaches it by that name.
lport=$(free_port)
printf 'cluster = {\n  servers = ["tcp://localhost:%s"];\n  workers = 1;\n};\n' "$lport" \
    >"$work/localhost.conf"
"$BIN/zeps-server" --config "$work/localhost.conf" --shard 0 >"$work/localhost.log" 2>&1 &
lsrv=$!
"$BIN/zepsctl" status --config "$work/localhost.conf" --timeout 5000 >"$work/localhost.out" 2>&1
check "a shard at tcp://localhost:PORT binds and answers status (got $?)" test $? -eq 0
kill -TERM $lsrv
wait $lsrv
check "the localhost shard stops cleanly" test $? -eq 0

# 3. Bad cluster files: refused before the network, with file, line and key.
cat >"$work/bad.conf" <<'EOF'
cluster = {
  servers = ["tcp://127.0.0.1:17999"];
  workers = 2;
  wrokers = 3;
};
EOF
"$BIN/zeps-server" --config "$work/bad.conf" --shard 0 >"$work/bad.out" 2>&1
rc=$?
check "server exits 2 on an unknown key (got $rc)" test $rc -eq 2
check "message names file, line and key" grep -q "bad.conf:4: unknown key 'cluster.wrokers'" "$work/bad.out"
check "nothing bound port 17999" bash -c "! (exec 3<>/dev/tcp/127.0.0.1/17999) 2>/dev/null"
cat >"$work/type.conf" <<'EOF'
cluster = {
  servers = ["tcp://127.0.0.1:17999"];
  workers = "four";
};
EOF
"$BIN/zeps-worker" --config "$work/type.conf" --rank 0 >"$work/type.out" 2>&1
rc=$?
check "worker exits 2 on a wrong type (got $rc)" test $rc -eq 2
check "message names the key and the type" grep -q "type.conf:3: 'cluster.workers' must be an integer" "$work/type.out"
printf 'cluster = { workers = 2; };\n' >"$work/missing.conf"
"$BIN/zepsctl" local --config "$work/missing.conf" >"$work/missing.out" 2>&1
rc=$?
check "zepsctl exits 2 on a missing key (got $rc)" test $rc -eq 2
check "message names the missing key" grep -q "cluster.servers" "$work/missing.out"
"$BIN/zeps-server" --config "$work/nonexistent.conf" --shard 0 >"$work/nofile.out" 2>&1
check "server exits 2 on a missing file" test $? -eq 2
check "message names the missing file" grep -q "nonexistent.conf" "$work/nofile.out"

# 4. zepsctl status against a live cluster, and with a shard down.
cat >"$work/st.conf" <<EOF
cluster = {
  servers = ["ipc://$work/st0", "ipc://$work/st1"];
  workers = 1;
  consistency = "async";
};
EOF
"$BIN/zeps-server" --config "$work/st.conf" --shard 0 >"$work/st0.log" 2>&1 &
s0=$!
# shard 1 takes its index from the Slurm task rank (no --shard)
env -u ZEPS_SHARD -u JOB_COMPLETION_INDEX SLURM_PROCID=1 \
    "$BIN/zeps-server" --config "$work/st.conf" >"$work/st1.log" 2>&1 &
s1=$!
"$BIN/zepsctl" status --config "$work/st.conf" --timeout 5000 >"$work/st.out" 2>&1
check "status exits 0 with every shard up" test $? -eq 0
check "status shows both shards" bash -c "grep -q 'shard 0/2' '$work/st.out' && grep -q 'shard 1/2' '$work/st.out'"
check "a server logs its index and where it came from" \
    grep -q 'shard index 1 of 2 (from \$SLURM_PROCID=1)' "$work/st1.log"
# One shard as a readiness probe asks it: by variable, by auto, at an endpoint.
MY_SHARD=1 "$BIN/zepsctl" status --config "$work/st.conf" --shard env:MY_SHARD --timeout 3000 \
    >"$work/st-one.out" 2>&1
check "status --shard env:NAME asks that shard" \
    bash -c "grep -q 'shard 1/2' '$work/st-one.out' && ! grep -q 'shard 0/2' '$work/st-one.out'"
env -u ZEPS_SHARD JOB_COMPLETION_INDEX=0 "$BIN/zepsctl" status --config "$work/st.conf" \
    --shard auto --timeout 3000 >"$work/st-auto.out" 2>&1
check "status --shard auto takes the engine's index" grep -q 'shard 0/2' "$work/st-auto.out"
"$BIN/zepsctl" status --config "$work/st.conf" --shard 1 --endpoint "ipc://$work/st0" \
    --timeout 3000 >"$work/st-ep.out" 2>&1
check "status --endpoint asks there and exits 1 when another shard answers" test $? -eq 1
check "and says which shard answered" grep -q 'answered as shard 0 of 2, not 1 of 2' "$work/st-ep.out"
"$BIN/zepsctl" status --config "$work/st.conf" --shard x >"$work/st-bad.out" 2>&1
check "status --shard x exits 2" test $? -eq 2
check "and says why" grep -q "'x' is not a number" "$work/st-bad.out"
kill -TERM $s1
wait $s1
check "a shard exits 0 on SIGTERM" test $? -eq 0
"$BIN/zepsctl" status --config "$work/st.conf" --timeout 500 >"$work/st2.out" 2>&1
check "status exits 1 with a shard down" test $? -eq 1
check "status names the dead shard's endpoint" grep -q "$work/st1" "$work/st2.out"
kill -INT $s0
wait $s0
check "a shard exits 0 on SIGINT" test $? -eq 0

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
