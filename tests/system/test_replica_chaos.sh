#!/usr/bin/env bash
# test_replica_chaos.sh - a primary SIGKILLed at a random moment of real
# training jobs on replicated shards (docs/faults.md, "Replicated shards";
# docs/replication.md).
#
# Each iteration runs small jobs of each model (mlp: hidden 32,
# Fashion-MNIST examples; ctr: LR + FM over generated Criteo-like lines in
# sparse tables) on 2 shards of 2 replicas each, a real ZooKeeper and 3
# zeps-worker processes, under bsp, ssp and async in turn, and SIGKILLs the
# primary of a shard drawn at random at a moment drawn between 10 % and 60 %
# of the undisturbed bsp run's training time (a kill that lands after the
# job ended is counted as missed, not as a failover). Nothing is restarted. Checks,
# per job:
#  - every worker finishes (exit 0) within JOB_S seconds, without
#    restarting and without a rollback (no "resuming from clock");
#  - 0 lost and 0 double-applied pushes: no table dropped a push as late
#    (its round closed without it), and per rank the pushes the shards'
#    primaries applied (STATS, `zepsctl stats --json`, the answers of
#    replicas whose role is primary) equal the pushes the
#    worker counted as acknowledged (`pushes_acked`), exactly;
#  - bsp: the final loss and accuracy equal the undisturbed run's to the
#    last printed digit;
#  - ssp: on every primary each dense table's clock gap is within the
#    staleness bound + 1 and its tau and clock-gap histograms count every push it
#    applied (the histograms are replicated state: they survive the
#    failover);
#  - the killed shard's backup becomes primary (at epoch 2, or later if
#    ZooKeeper lost every session meanwhile); the time from the kill to
#    its election and to each worker's first request served there
#    ("primary is now replica") is printed, and their median and largest
#    summed up at the end.
#
#   test_replica_chaos.sh      env: ZEPS_RCHAOS_ITERATIONS (default 1),
#   ZEPS_RCHAOS_SEED (default: from the clock; printed), ZEPS_RCHAOS_MODES
#   (default "bsp ssp async"), ZEPS_RCHAOS_MODELS (default "mlp ctr"),
#   ZEPS_TEST_KEEP=1 keeps the run folder.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
ITERS=${ZEPS_RCHAOS_ITERATIONS:-1}
SEED=${ZEPS_RCHAOS_SEED:-$(($(date +%s) % 100000))}
MODES=${ZEPS_RCHAOS_MODES:-bsp ssp async}
MODELS=${ZEPS_RCHAOS_MODELS:-mlp ctr}
JOB_S=${ZEPS_RCHAOS_JOB_S:-150}
NW=3
EPOCHS=${ZEPS_RCHAOS_EPOCHS:-6}
EXAMPLES=${ZEPS_RCHAOS_EXAMPLES:-12000}
export OPENBLAS_NUM_THREADS=1
RANDOM=$SEED
pass=0 fail=0

if [ ! -f /usr/share/java/zookeeper.jar ]; then
    echo "skip: ZooKeeper is not installed (bash deploy/install-deps.sh zk)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-rchaos-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    zk_stop KILL
    if [ -z "${ZEPS_TEST_KEEP:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
zk_start "$work/zk" || { echo "FAIL - ZooKeeper did not start"; exit 1; }
echo "seed $SEED, ZooKeeper at $ZK_HOSTS"

ms_now() { date +%s%3N; }
training() { # dir model
    if [ "$2" = ctr ]; then
        cat <<EOF
    model = "ctr"; epochs = 2; batch_size = 128; optimizer = "adagrad"; lr = 0.05; seed = 1;
    ctr = { format = "criteo"; train_file = "$work/criteo/train.txt";
            test_file = "$work/criteo/test.txt"; emb_dim = 8; sparse_lr = 0.05;
            emb_lr = 0.003; emb_init = 0.01; };
    result_dir = "$1";
EOF
    else
        cat <<EOF
    model = "mlp"; epochs = $EPOCHS; batch_size = 32; hidden = 32;
    optimizer = "momentum"; lr = 0.003; momentum = 0.9; seed = 1;
    max_train_examples = $EXAMPLES; result_dir = "$1";
EOF
    fi
}
conf() { # dir consistency name model
    mkdir -p "$1"
    local e
    for e in 00 01 10 11; do eval "EP$e=tcp://127.0.0.1:$(free_port)"; done
    cat >"$1/cluster.conf" <<EOF
cluster = {
    servers = ( [ "$EP00", "$EP01" ], [ "$EP10", "$EP11" ] );
    replicas = 2;
    coordination = { zookeeper = "$ZK_HOSTS"; name = "$3"; session_timeout_ms = 1000; };
    workers = $NW;
    consistency = "$2";
    staleness = 2;
    insecure = true;
    request_timeout_ms = 500;
    max_retries = 40;
};
training = {
$(training "$1" "$4")
};
EOF
}
declare -A SRV
start_server() { # dir shard replica
    "$BIN/zeps-server" --config "$1/cluster.conf" --shard "$2" --replica "$3" \
        >>"$1/server-$2.$3.log" 2>&1 &
    SRV[$2.$3]=$!
    pids+=($!)
}
# end_pid PID DEADLINE: its exit status once it ended by SECONDS = DEADLINE;
# else it is killed and 124 returned (a hang)
end_pid() {
    while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt "$2" ]; do sleep 0.1; done
    if kill -0 "$1" 2>/dev/null; then
        kill -KILL "$1" 2>/dev/null
        wait "$1" 2>/dev/null
        return 124
    fi
    wait "$1"
}
# the log line's time in ms since the epoch
line_ms() { date -d "$(cut -d' ' -f1 <<<"$1")" +%s%3N; }

# applied == acknowledged per rank, from the primaries' STATS; under ssp
# every table's clock gap within the bound + 1, and its histograms holding
# every push (they are replicated state)
check_pushes() { # dir mode
    /usr/bin/python3 - "$1" "$NW" "$2" <<'EOF'
import json, sys
d, nw, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    shards = json.load(open(f"{d}/stats.json"))
except (OSError, ValueError) as e:
    print(f"stats unreadable: {e}"); sys.exit(1)
# one answer per shard: its primary's (the killed replica does not answer)
primaries = [s for s in shards if s.get("answered") and s.get("role") == "primary"]
if sorted(s["shard"] for s in primaries) != sorted({s["shard"] for s in shards}):
    print("not one primary per shard answered STATS: "
          + ", ".join(f"{s['shard']}.{s.get('replica')} {s.get('role')}" for s in shards))
    sys.exit(1)
shards = primaries
bad, said = 0, []
for r in range(nw):
    applied = sum(w["pushes"] for s in shards for w in s["workers"] if w["rank"] == r)
    acked = json.load(open(f"{d}/worker-{r}.json"))["pushes_acked"]
    bad += applied != acked
    why = "ok" if applied == acked else "DOUBLE APPLY" if applied > acked else "LOST"
    said.append(f"rank {r}: {applied} applied, {acked} acknowledged ({why})")
# a push dropped as late (its round closed without it) was acknowledged
# but not applied: lost all the same (these jobs have no backup workers)
for s in shards:
    for t in s["tables"]:
        if t.get("dropped", 0):
            bad += 1
            said.append(f"shard {s['shard']} table {t['name']}: {t['dropped']} rows of pushes "
                        "dropped as late (LOST)")
for s in shards:
    for t in s["tables"] if mode == "ssp" else []:
        gap, tau = t["clock_gap"], t["tau"]
        if t["length"] == 0:  # sparse: tau is per row, its histogram counts rows
            continue
        if gap["max"] > t["staleness"] + 1 or gap["n"] != t["pushes"] or tau["n"] != t["pushes"]:
            bad += 1
            said.append(f"shard {s['shard']} table {t['name']}: clock gap up to {gap['max']} "
                        f"(bound {t['staleness']} + 1), histograms of {gap['n']} and {tau['n']} "
                        f"pushes of {t['pushes']}")
if mode == "ssp":
    said.append("ssp: clock gaps within the bound + 1, histograms complete")
print("; ".join(said))
sys.exit(1 if bad else 0)
EOF
}

# run_job DIR MODE AFTER_MS SHARD MODEL: sets OK, WHY, LOSS, ACC, TRAIN_MS, ELECT_MS, REACH_MS
run_job() {
    local d=$1 mode=$2 after=$3 k=$4 model=$5 t0=$SECONDS r s
    conf "$d" "$mode" "$(basename "$d")" "$model"
    OK=1 WHY="" ELECT_MS="" REACH_MS=""
    for s in 0 1; do start_server "$d" $s 0; done
    for s in 0 1; do wait_for "$d/server-$s.0.log" "-> primary at epoch 1" 30; done
    for s in 0 1; do start_server "$d" $s 1; done
    for s in 0 1; do wait_for "$d/server-$s.0.log" "in-sync set: 2 replica" 30; done
    local wp=()
    for ((r = 0; r < NW; r++)); do
        "$BIN/zeps-worker" --config "$d/cluster.conf" --rank $r >>"$d/worker-$r.log" 2>&1 &
        wp+=($!)
        pids+=($!)
    done
    for ((r = 0; r < NW; r++)); do wait_for "$d/worker-$r.log" "training $model" 60; done
    local m0 kill_ms
    m0=$(ms_now)
    if [ "$k" -ge 0 ]; then
        sleep "$(awk -v m="$after" 'BEGIN{print m / 1000}')"
        kill_ms=$(ms_now)
        { kill -KILL "${SRV[$k.0]}" && wait "${SRV[$k.0]}"; } 2>/dev/null
    fi
    for ((r = 0; r < NW; r++)); do
        end_pid "${wp[$r]}" $((t0 + JOB_S))
        local rc=$?
        if [ $rc = 124 ]; then
            OK=0 WHY+=" worker $r HUNG;"
        elif [ $rc != 0 ]; then
            OK=0 WHY+=" worker $r exit $rc: $(grep ' ERROR ' "$d/worker-$r.log" | tail -1 | cut -c1-200);"
        fi
        if grep -q "resuming from clock\|restarted" "$d/worker-$r.log"; then
            OK=0 WHY+=" worker $r rolled back or restarted;"
        fi
    done
    TRAIN_MS=$(($(ms_now) - m0))
    # the counts are read once every shard has one primary answering: a
    # loaded machine may stall ZooKeeper past the sessions after the job,
    # and the replicas are elected again meanwhile
    local try ok=0
    for try in 1 2 3 4 5 6 7 8; do
        timeout 30 "$BIN/zepsctl" stats --config "$d/cluster.conf" --json >"$d/stats.json" \
            2>"$d/stats.err"
        PUSHES=$(check_pushes "$d" "$mode") && ok=1 && break
        grep -q "not one primary per shard answered\|stats unreadable" <<<"$PUSHES" || break
        sleep 2
    done
    [ $ok = 1 ] || { OK=0 WHY+=" pushes: $PUSHES;"; }
    if [ "$k" -ge 0 ]; then
        local line
        line=$(grep -m1 -- "-> primary at epoch [0-9]" "$d/server-$k.1.log")
        if [ -z "$line" ]; then
            OK=0 WHY+=" shard $k's backup never became primary;"
        else
            ELECT_MS=$(($(line_ms "$line") - kill_ms))
        fi
        for ((r = 0; r < NW; r++)); do
            line=$(grep -m1 "shard $k: primary is now replica 1" "$d/worker-$r.log")
            [ -n "$line" ] && REACH_MS+=" $(($(line_ms "$line") - kill_ms))"
        done
    fi
    LOSS=$(json_num "$d/worker-0.json" final_loss)
    ACC=$(json_num "$d/worker-0.json" final_accuracy)
    [ "$model" = ctr ] && ACC=$(json_num "$d/worker-0.json" final_auc)
    for s in "${!SRV[@]}"; do kill -TERM "${SRV[$s]}" 2>/dev/null; done
    for s in "${!SRV[@]}"; do end_pid "${SRV[$s]}" $((SECONDS + 20)) || true; done
    SRV=()
}

if [[ " $MODELS " == *" ctr "* ]]; then
    "$BIN/zepsctl" gen-criteo --out "$work/criteo" --train 40000 --test 10000 --scale 0.01 \
        --seed 3 -q >"$work/gen.out" 2>&1 || { echo "FAIL - gen-criteo"; exit 1; }
fi
elects=() reaches=() missed=0
for model in $MODELS; do
    run_job "$work/ref-$model" bsp 0 -1 "$model"
    check "undisturbed bsp $model run on replicated shards finishes (loss $LOSS, $ACC; $PUSHES)" \
        test "$OK" = 1
    REF_LOSS=$LOSS REF_ACC=$ACC REF_MS=$TRAIN_MS
    for ((i = 1; i <= ITERS; i++)); do
        for mode in $MODES; do
            after=$((REF_MS * (10 + RANDOM % 51) / 100))
            k=$((RANDOM % 2))
            run_job "$work/it$i-$model-$mode" "$mode" "$after" "$k" "$model"
            res=""
            if [ "$mode" = bsp ] && [ "$OK" = 1 ]; then
                if [ "$LOSS $ACC" = "$REF_LOSS $REF_ACC" ]; then res=", bit-identical"; else
                    OK=0 WHY+=" final loss and accuracy $LOSS $ACC, undisturbed $REF_LOSS $REF_ACC;"
                fi
            fi
            echo "   $model $mode: shard $k's primary SIGKILLed at $after ms: elected after" \
                "${ELECT_MS:-?} ms, workers there after${REACH_MS:- ?} ms; $PUSHES$res"
            [ -n "$ELECT_MS" ] && elects+=("$ELECT_MS")
            [ -z "$REACH_MS" ] && missed=$((missed + 1))
            for x in $REACH_MS; do reaches+=("$x"); done
            check "iteration $i, $model $mode:$WHY" test "$OK" = 1
        done
    done
done
summary() { # name values...
    local n=$1
    shift
    [ $# -gt 0 ] || return 0
    printf '%s\n' "$@" | sort -n | awk -v n="$n" '{a[NR] = $1} END {
        printf "%s: %d, median %d ms, largest %d ms\n", n, NR, a[int((NR + 1) / 2)], a[NR]}'
}
summary "kill to election" "${elects[@]}"
summary "kill to a worker's first request at the new primary" "${reaches[@]}"
echo "kills that landed after the job had ended (no worker moved): $missed"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
