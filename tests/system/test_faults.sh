#!/usr/bin/env bash
# test_faults.sh - surviving crashes, with real processes (docs/faults.md).
#
# A BSP mlp job (2 shards, 4 workers, Fashion-MNIST, a shortened
# deploy/local/default.conf: 8 epochs of 12000 examples) runs undisturbed,
# then again with a fault injected mid-training; the final test accuracy of
# the disturbed run must be within 1 point of the undisturbed one (BSP
# recovery redoes the lost clocks on the same data, so it is in fact equal).
#
#   test_faults.sh server   SIGKILL shard 1 after its snapshot of clock 100,
#                           restart it: it restores the cut, every worker
#                           and shard 0 roll back to it, training finishes
#   test_faults.sh worker   SIGKILL worker 2, restart it with the same rank:
#                           it rejoins at the clock the shards recorded
#   test_faults.sh lost     lost_worker_timeout_s = 2: with "wait" a killed
#                           worker is declared lost, the rounds wait, and it
#                           rejoins when restarted; with "continue" the
#                           rounds close without it and training finishes
#
# The full-length comparison (deploy/local/default.conf's 30 epochs on all
# 60000 examples, shard or worker killed after clock 3000):
#   FAULTS_EPOCHS=30 FAULTS_EXAMPLES=0 FAULTS_KILL_AT=3000 test_faults.sh server
#
# Processes are started and ended by pid only; nothing is left running.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
MODE=${1:?usage: test_faults.sh server|worker|lost}
EPOCHS=${FAULTS_EPOCHS:-8}
EXAMPLES=${FAULTS_EXAMPLES:-12000}
KILL_AT=${FAULTS_KILL_AT:-100} # a multiple of 20 (the cut interval)
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-faults-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    [ -z "${ZEPS_TEST_KEEP:-}" ] && rm -rf "$work"
}
trap cleanup EXIT

# wait_pids SECONDS pid...: wait for processes with a deadline; 0 if all exited 0
wait_pids() {
    local end=$((SECONDS + $1)) rc=0
    shift
    for p in "$@"; do
        while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
        if kill -0 "$p" 2>/dev/null; then
            kill -KILL "$p" 2>/dev/null
            rc=1
        fi
        wait "$p" || rc=1
    done
    return $rc
}

# conf DIR EXTRA: the cluster file (EXTRA goes inside cluster = { })
conf() {
    mkdir -p "$1"
    cat >"$1/cluster.conf" <<EOF
cluster = {
    servers = [ "ipc://$1/s0", "ipc://$1/s1" ];
    workers = 4;
    consistency = "bsp";
    snapshot_dir = "$1/snap";
    snapshot_every_clocks = 20;
    request_timeout_ms = 500;
    max_retries = 40;
    $2
};
training = {
    model = "mlp";
    epochs = $EPOCHS;
    batch_size = 64;
    hidden = 256;
    optimizer = "momentum";
    lr = 0.025;
    momentum = 0.9;
    seed = 1;
    max_train_examples = $EXAMPLES;
    result_dir = "$1";
};
EOF
}
declare -A SRV WRK
start_server() { # dir shard
    "$BIN/zeps-server" --config "$1/cluster.conf" --shard "$2" >>"$1/server-$2.log" 2>&1 &
    SRV[$2]=$!
    pids+=($!)
}
start_worker() { # dir rank
    "$BIN/zeps-worker" --config "$1/cluster.conf" --rank "$2" >>"$1/worker-$2.log" 2>&1 &
    WRK[$2]=$!
    pids+=($!)
}
start_job() { # dir
    start_server "$1" 0
    start_server "$1" 1
    for r in 0 1 2 3; do start_worker "$1" $r; done
}
stop_servers() {
    kill -TERM "${SRV[0]}" "${SRV[1]}" 2>/dev/null
    wait_pids 20 "${SRV[0]}" "${SRV[1]}"
}
finish_job() { # dir: wait for the workers, stop the servers
    local t0=$SECONDS
    wait_pids 900 "${WRK[0]}" "${WRK[1]}" "${WRK[2]}" "${WRK[3]}"
    local rc=$?
    stop_servers
    echo "   (job in $1 finished in $((SECONDS - t0)) s after the fault handling)"
    return $rc
}
accuracy() { json_num "$1/worker-0.json" final_accuracy; }
within_1pt() { # a b
    awk -v a="${1:-0}" -v b="${2:-9}" 'BEGIN{d = a - b; if (d < 0) d = -d; exit !(d <= 0.01)}'
}

ref=$work/ref
if [ "$MODE" != lost ]; then
    conf "$ref" ""
    start_job "$ref"
    check "undisturbed run finishes" finish_job "$ref"
    acc_ref=$(accuracy "$ref")
    echo "   undisturbed final test accuracy: $acc_ref"
fi

case $MODE in
server)
    d=$work/crash
    conf "$d" ""
    start_job "$d"
    check "shard 1 wrote the cut of clock $KILL_AT" \
        wait_for "$d/server-1.log" "clock $KILL_AT) written" 600
    kill -KILL "${SRV[1]}"
    wait "${SRV[1]}" 2>/dev/null
    start_server "$d" 1
    check "restarted shard 1 restores a snapshot" \
        wait_for "$d/server-1.log" "restored snapshot set" 20
    check "training finishes after the shard crash" finish_job "$d"
    check "shard 0 rolled back to the same cut" grep -q "rolled back to snapshot set" \
        "$d/server-0.log"
    check "workers resumed from the cut" grep -q "resuming from clock" "$d/worker-0.log"
    acc=$(accuracy "$d")
    echo "   final test accuracy after SIGKILL + restart of shard 1: $acc"
    check "accuracy $acc within 1 point of $acc_ref" within_1pt "$acc" "$acc_ref"
    ;;
worker)
    d=$work/crash
    conf "$d" ""
    start_job "$d"
    check "the job reached clock $KILL_AT" wait_for "$d/server-1.log" "clock $KILL_AT) written" 600
    kill -KILL "${WRK[2]}"
    wait "${WRK[2]}" 2>/dev/null
    start_worker "$d" 2
    check "shard 0 saw worker 2 rejoin" \
        wait_for "$d/server-0.log" "worker 2 rejoined with a new incarnation" 30
    check "training finishes after the worker crash" finish_job "$d"
    check "the new worker 2 resumed at the recorded clock" grep -q "resuming at clock" \
        "$d/worker-2.log"
    acc=$(accuracy "$d")
    echo "   final test accuracy after SIGKILL + restart of worker 2: $acc"
    check "accuracy $acc within 1 point of $acc_ref" within_1pt "$acc" "$acc_ref"
    ;;
lost)
    # wait: the rounds wait for the lost worker, which rejoins when restarted
    d=$work/wait
    conf "$d" 'lost_worker_timeout_s = 2; on_lost_worker = "wait";'
    start_job "$d"
    check "wait: the job reached clock 60" wait_for "$d/server-0.log" "clock 60) written" 120
    kill -KILL "${WRK[3]}"
    wait "${WRK[3]}" 2>/dev/null
    check "wait: worker 3 declared lost" wait_for "$d/server-0.log" "worker 3 declared lost" 20
    check "wait: the log says the rounds wait" grep -q "rounds wait for it" "$d/server-0.log"
    start_worker "$d" 3
    check "wait: training finishes after worker 3 rejoined" finish_job "$d"
    check "wait: worker 3 rejoined" grep -q "worker 3 rejoined" "$d/server-1.log"
    acc=$(accuracy "$d")
    echo "   wait: final test accuracy $acc"
    check "wait: accuracy $acc > 0.75" awk -v a="${acc:-0}" 'BEGIN{exit !(a > 0.75)}'
    # continue: the rounds close without it; the others finish alone
    d=$work/continue
    conf "$d" 'lost_worker_timeout_s = 2; on_lost_worker = "continue";'
    start_job "$d"
    check "continue: the job reached clock 60" wait_for "$d/server-0.log" "clock 60) written" 120
    kill -KILL "${WRK[3]}"
    wait "${WRK[3]}" 2>/dev/null
    WRK[3]=$$ # not waited for: it is gone
    check "continue: worker 3 declared lost" \
        wait_for "$d/server-1.log" "worker 3 declared lost" 20
    wait_pids 150 "${WRK[0]}" "${WRK[1]}" "${WRK[2]}"
    check "continue: the three others finish without it" test $? -eq 0
    "$BIN/zepsctl" status --config "$d/cluster.conf" >"$d/status.out" 2>&1
    stop_servers
    check "continue: zepsctl status counts the lost worker" grep -q "lost workers 1" \
        "$d/status.out"
    check "continue: rounds closed without it (log)" grep -q "rounds close without it" \
        "$d/server-0.log"
    acc=$(accuracy "$d")
    echo "   continue: final test accuracy $acc"
    check "continue: accuracy $acc > 0.75" awk -v a="${acc:-0}" 'BEGIN{exit !(a > 0.75)}'
    ;;
*)
    bad "unknown mode $MODE"
    ;;
esac

leftover=0
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && [ "$p" != $$ ] && leftover=1; done
check "no process left running" test $leftover -eq 0
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
