#!/usr/bin/env bash
# test_local_failover.sh - `zepsctl local --replicas 3` (three replicas a
# shard) through two failovers: a bsp mlp job runs undisturbed, then again
# with the primary of shard 0 SIGKILLed twice while the workers train
# (the second kill takes the backup the first promoted). Checks:
#  - zepsctl local carries on (exit 0) and says, for each kill, that the
#    shard carries on at its other replicas; its summary says "done";
#  - the final loss and accuracy equal the undisturbed run's to the last
#    digit, and every worker followed the shard twice (2 redirects);
#  - the third replica ends primary at epoch 3;
#  - the undisturbed run (with --metrics) prints each replica's /metrics
#    URL as "server S.R".
# Prints "N passed, N failed"; exits non-zero on a failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
export OPENBLAS_NUM_THREADS=1
if [ ! -f /usr/share/java/zookeeper.jar ]; then
    echo "skip: ZooKeeper is not installed (bash deploy/install-deps.sh zk)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-lfo-XXXXXX)
lp=
trap '[ -n "$lp" ] && kill -TERM $lp 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
EPOCHS=24
JOB=(--replicas 3 --consistency bsp --model mlp --epochs $EPOCHS --max-train-examples 6000 --seed 5
    -q --timeout 300)

# the pid of shard 0's primary now: the replica whose log last said it
# became primary, and is still running
primary_of_shard0() { # run dir
    local f r
    for f in "$1"/server-0.*.log; do
        r=${f%.log}
        r=${r##*.}
        if grep -o -- '-> [a-z]* at epoch [0-9]*' "$f" | tail -1 | grep -q primary; then
            pgrep -f -- "--config $1/cluster.conf --shard 0 --replica $r\$"
        fi
    done | head -1
}
final() { # run dir: rank 0's final loss and accuracy, and every rank's redirects
    /usr/bin/python3 -c '
import json, sys, glob
w = [json.load(open(f)) for f in sorted(glob.glob(sys.argv[1] + "/worker-*.json"))]
print(repr(w[0]["final_loss"]), repr(w[0]["final_accuracy"]), *[x["redirects"] for x in w])
' "$1"
}

"$BIN/zepsctl" local "${JOB[@]}" --metrics --dir "$work/calm" >"$work/calm.out" 2>&1
check "the undisturbed run trains (exit 0)" test $? = 0
check "  with --metrics it names each replica's URL (server S.R)" test "$(grep -o \
    'server [0-9]\.[0-9] metrics on http://127.0.0.1:[0-9]*/metrics' "$work/calm.out" |
    cut -d' ' -f2 | sort -u | tr '\n' ' ')" = "0.0 0.1 0.2 1.0 1.1 1.2 "
calm=$(final "$work/calm")
echo "undisturbed: $calm"

"$BIN/zepsctl" local "${JOB[@]}" --dir "$work/kill" >"$work/kill.out" 2>&1 &
lp=$!
wait_for "$work/kill/worker-0.log" "epoch 1/$EPOCHS" 60
killed=0
for n in 1 2; do
    # the second kill as soon as the workers reached the first's successor
    [ $n = 2 ] && wait_for "$work/kill/worker-0.log" "primary is now replica" 15
    sleep 0.5
    p=$(primary_of_shard0 "$work/kill")
    if [ -n "$p" ] && ! grep -q "epoch $EPOCHS/$EPOCHS" "$work/kill/worker-0.log"; then
        echo "kill $n: pid $p ($(ps -o args= -p "$p" 2>/dev/null | grep -o 'replica [0-9]'))"
        kill -KILL "$p" && killed=$((killed + 1))
    fi
done
wait $lp
rc=$?
lp=
check "both kills landed while the workers trained" test $killed = 2
check "zepsctl local carried on through both (exit 0)" test $rc = 0
check "  and said so for each kill" test "$(grep -c "shard 0 carries on at its other replicas" "$work/kill.out")" = 2
check "  and its summary says done" grep -q '"outcome": *"done"' "$work/kill/summary.json"
got=$(final "$work/kill")
echo "with two failovers: $got"
check "the final loss and accuracy equal the undisturbed run's" test "${got% * * * *}" = "${calm% * * * *}"
check "every worker followed shard 0 twice (2 redirects each)" test "${got#* * }" = "2 2 2 2"
check "the third replica ends primary at epoch 3" bash -c \
    "grep -h -- '-> primary at epoch 3' '$work'/kill/server-0.*.log | grep -q ."
[ "$fail" -eq 0 ] || { tail -20 "$work/kill.out"; }
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
