#!/usr/bin/env bash
# test_exit_codes.sh - the exit-status table of docs/operations.md, kept by
# every start-up failure of zeps-server, zeps-worker and zepsctl: each case
# starts the real program on a free port, checks its exit status (2: the
# operator must fix something; 1: failed while running) and that its output
# names the cause. Also the folders: a missing snapshot_dir, trace_dir or
# result_dir is created; one that is a file, or cannot take a file (a
# read-only bind mount: root ignores mode bits, so chmod 000 would not do),
# stops the program at start with exit 2 and the key's name (the read-only
# cases need root, and are skipped with a note otherwise).
# Prints "N passed, N failed" at the end; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-exit-XXXXXX)
pids=()
mounts=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

port=$(free_port)
ep="tcp://127.0.0.1:$port"
# conf NAME [CLUSTER-KEYS [TRAINING-KEYS]]: a one-shard, one-worker cluster
conf() {
    cat >"$work/$1.conf" <<EOC
cluster = { servers = [ "$ep" ]; workers = 1; consistency = "async";
            hello_timeout_ms = ${HELLO_MS:-300}; request_timeout_ms = 300; ${2:-} };
training = { model = "quadratic"; epochs = 1; iterations = 20; dim = 10;
             optimizer = "sgd"; lr = 0.1; ${3:-} };
EOC
    echo "$work/$1.conf"
}
# expect WHAT CODE PATTERN CMD...: CMD exits CODE and its output has PATTERN
expect() {
    local what=$1 code=$2 pat=$3
    shift 3
    timeout 60 "$@" >"$work/out" 2>&1
    local rc=$?
    if [ "$rc" -eq "$code" ] && grep -qE -- "$pat" "$work/out"; then
        ok "$what: exit $code, says /$pat/"
    else
        bad "$what: exit $rc (want $code), output: $(head -c 600 "$work/out")"
    fi
}
# ro_dir PATH: make PATH a folder no file can be created in, even by root
ro_dir() {
    mkdir -p "$1" && mount --bind "$1" "$1" && mounts+=("$1") &&
        mount -o remount,ro,bind "$1" && ! touch "$1/probe" 2>/dev/null
}

good=$(conf good)
S="$BIN/zeps-server"
W="$BIN/zeps-worker"
C="$BIN/zepsctl"

# ---- zeps-server --------------------------------------------------------
expect "server without arguments" 2 "usage: zeps-server" "$S"
expect "server, unknown option" 2 "usage: zeps-server" "$S" --bogus -c "$good"
expect "server, missing cluster file" 2 "nope.conf" "$S" -c "$work/nope.conf" --shard 0
printf 'cluster = { servers = [ "%s" ] \n' "$ep" >"$work/syntax.conf"
expect "server, cluster file syntax" 2 "syntax.conf:[0-9]+" "$S" -c "$work/syntax.conf" --shard 0
expect "server, unknown key" 2 "bogus_key" "$S" -c "$(conf unknown 'bogus_key = 1;')" --shard 0
expect "server, shard outside the cluster" 2 "outside the cluster" "$S" -c "$good" --shard 3
expect "server, bad ZEPS_SHARD" 2 "ZEPS_SHARD" env ZEPS_SHARD=x "$S" -c "$good"
expect "server, bad log level" 2 "log level" "$S" -c "$good" --shard 0 --log-level loud
sed 's/"async"/"nosuchmode"/' "$good" >"$work/mode.conf"
expect "server, unknown consistency mode" 2 "nosuchmode" "$S" -c "$work/mode.conf" --shard 0
mkdir -p "$work/keys" "$work/allow"
for n in server w0 w1; do "$C" keygen --out "$work/keys" --name $n >/dev/null 2>&1; done
cp "$work/keys/w0.pub" "$work/allow/"
k="$work/keys"
curve="curve_server_secret = \"$k/server.key\"; curve_server_public = \"$k/server.pub\"; curve_allow_dir = \"$work/allow\";"
expect "server, missing secret key file" 2 "missing.key" \
    "$S" -c "$(conf nokey "curve_server_secret = \"$k/missing.key\"; curve_allow_dir = \"$work/allow\";")" --shard 0
echo "not a key" >"$work/allow/junk.pub"
expect "server, bad allow-list entry" 2 "junk.pub" "$S" -c "$(conf allowbad "$curve")" --shard 0
rm "$work/allow/junk.pub"
expect "server, missing allow-list folder" 2 "noallow" \
    "$S" -c "$(conf noallow "curve_server_secret = \"$k/server.key\"; curve_allow_dir = \"$work/noallow\";")" --shard 0
expect "server, non-loopback bind without keys" 2 "insecure" \
    "$S" -c "$(conf wild "binds = [ \"tcp://0.0.0.0:$port\" ];")" --shard 0
expect "server, address not local" 2 "cannot bind shard 0 to tcp://192.0.2.1:$port" \
    "$S" -c "$(conf notlocal "binds = [ \"tcp://192.0.2.1:$port\" ]; insecure = true;")" --shard 0
"$S" -c "$good" --shard 0 >"$work/holder.log" 2>&1 &
holder=$!
pids+=("$holder")
for _ in $(seq 100); do grep -q "serving on" "$work/holder.log" && break; sleep 0.1; done
expect "server, address in use" 2 "cannot bind shard 0 to $ep" "$S" -c "$good" --shard 0
# the metrics endpoint (metrics_listen / --metrics-listen): a bad address, or
# a port taken (here by the holder's ZeroMQ socket), is the operator's to fix
expect "server, bad metrics_listen" 2 'metrics_listen = "nohost" must be HOST:PORT' \
    "$S" -c "$(conf mbad 'metrics_listen = "nohost";')" --shard 0
sed "s|$ep|tcp://127.0.0.1:$(free_port)|" "$good" >"$work/mport.conf"
expect "server, metrics port in use" 2 "cannot listen for HTTP on 127.0.0.1:$port" \
    "$S" -c "$work/mport.conf" --shard 0 --metrics-listen "127.0.0.1:$port"

# ---- folders ------------------------------------------------------------
touch "$work/afile"
expect "server, snapshot_dir is a file" 2 "snapshot_dir '$work/afile'" \
    "$S" -c "$(conf snapfile "snapshot_dir = \"$work/afile\";")" --shard 0
expect "server, trace_dir is a file" 2 "trace_dir '$work/afile'" \
    "$S" -c "$(conf tracefile "trace_dir = \"$work/afile\";")" --shard 0
expect "server, trace_dir under a file" 2 "trace_dir '$work/afile/t'.*a file, not a folder" \
    "$S" -c "$(conf traceunder "trace_dir = \"$work/afile/t\";")" --shard 0
if [ "$(id -u)" -ne 0 ]; then
    echo "skip - read-only folders: a bind mount needs root"
elif ro_dir "$work/ro"; then
    expect "server, read-only snapshot_dir" 2 "snapshot_dir '$work/ro' is not writable" \
        "$S" -c "$(conf snapro "snapshot_dir = \"$work/ro\";")" --shard 0
    expect "server, read-only trace_dir" 2 "trace_dir '$work/ro/t'" \
        "$S" -c "$(conf tracero "trace_dir = \"$work/ro/t\";")" --shard 0
    expect "worker, read-only result_dir" 2 "result_dir '$work/ro' is not writable" \
        "$W" -c "$(conf resro "" "result_dir = \"$work/ro\";")" --rank 0
else
    bad "cannot make a read-only bind mount as root: folder checks untested"
fi
# missing folders are created (with parents) and the run works
kill -TERM "$holder"
wait "$holder"
# an address held for a moment longer (a SIGKILLed shard's snapshot writer
# that has not run since the fork holds the listening socket): the shard
# restarted on it waits for it and serves (docs/faults.md)
/usr/bin/python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); open(sys.argv[2], "w").close()
time.sleep(1.5)' "$port" "$work/held" &
pids+=("$!")
for _ in $(seq 100); do [ -e "$work/held" ] && break; sleep 0.05; done
"$S" -c "$good" --shard 0 >"$work/late.log" 2>&1 &
late=$!
pids+=("$late")
for _ in $(seq 100); do grep -q "serving on" "$work/late.log" && break; sleep 0.1; done
check "server waits for an address still held" grep -q "is in use: waiting up to 5 s" "$work/late.log"
check "... and serves on it once free" grep -q "serving on $ep" "$work/late.log"
kill -TERM "$late"
wait "$late"
fresh=$(conf fresh "snapshot_dir = \"$work/new/snap\"; trace_dir = \"$work/new/trace\";" \
    "result_dir = \"$work/new/results\";")
"$S" -c "$fresh" --shard 0 >"$work/fresh.log" 2>&1 &
srv=$!
pids+=("$srv")
expect "worker trains into a result_dir it created" 0 "done:" "$W" -c "$fresh" --rank 0
kill -TERM "$srv"
wait "$srv"
check "server stopped 0 after SIGTERM" test $? -eq 0
check "missing trace_dir created, trace written" test -s "$work/new/trace/trace-shard0.csv"
check "missing snapshot_dir created" test -d "$work/new/snap"
check "result written into the created result_dir" test -s "$work/new/results/worker-0.json"
# the final snapshot is of 1 worker: a cluster of 2 cannot restore it
sed 's/workers = 1;/workers = 2;/' "$fresh" >"$work/two.conf"
expect "server, snapshot set it cannot restore" 2 "is of a cluster of 1 workers, this one has 2" \
    "$S" -c "$work/two.conf" --shard 0

# ---- zeps-worker --------------------------------------------------------
expect "worker without arguments" 2 "usage: zeps-worker" "$W"
expect "worker, missing cluster file" 2 "nope.conf" "$W" -c "$work/nope.conf" --rank 0
expect "worker, rank outside the cluster" 2 "outside the cluster" "$W" -c "$good" --rank 1
expect "worker, bad --metrics-listen" 2 'metrics_listen = "nohost" must be HOST:PORT' \
    "$W" -c "$good" --rank 0 --metrics-listen nohost
expect "worker, result_dir is a file" 2 "result_dir '$work/afile'" \
    "$W" -c "$(conf resfile "" "result_dir = \"$work/afile\";")" --rank 0
expect "worker, missing data for mlp" 2 "nodata" \
    "$W" -c "$(conf nodata "" "model = \"mlp\"; data_dir = \"$work/nodata\";")" --rank 0
expect "worker, missing client key file" 2 "missing.key" \
    "$W" -c "$(conf wkey "curve_server_public = \"$k/server.pub\"; curve_client_public = \"$k/w0.pub\"; curve_client_secret = \"$k/missing.key\";")" --rank 0
expect "worker, no shard answers (runtime)" 1 "did not answer HELLO" "$W" -c "$good" --rank 0
# a key the shard refuses: the operator must add it to the allow-list. The
# refusal ends the wait as soon as the handshake fails; the long HELLO
# timeout only keeps a slow CURVE handshake (ASan, a loaded machine) from
# being taken for a shard that does not answer (exit 1).
HELLO_MS=20000
keyed=$(conf keyed "$curve")
"$S" -c "$keyed" --shard 0 >"$work/keyed.log" 2>&1 &
srv=$!
pids+=("$srv")
for _ in $(seq 100); do grep -q "serving on" "$work/keyed.log" && break; sleep 0.1; done
w1="$curve curve_client_public = \"$k/w1.pub\"; curve_client_secret = \"$k/w1.key\";"
expect "worker, key refused by the shard" 2 "shard 0 \\($ep\\) refused our key" \
    "$W" -c "$(conf w1 "$w1")" --rank 0
expect "zepsctl status, key refused by the shard" 2 "shard 0 \\($ep\\) refused our key" \
    "$C" status --config "$(conf w1 "$w1")"
expect "zepsctl snapshot take, key refused by the shard" 2 "shard 0 \\($ep\\) refused our key" \
    "$C" snapshot take --config "$work/w1.conf"
HELLO_MS=300
kill -TERM "$srv"
wait "$srv"

# ---- zepsctl ------------------------------------------------------------
expect "zepsctl without arguments" 2 "usage: zepsctl" "$C"
expect "zepsctl, unknown command" 2 "unknown command 'frobnicate'" "$C" frobnicate
expect "zepsctl version, an option it does not take" 2 "unexpected argument '--bogus'" \
    "$C" version --bogus
expect "zepsctl status, unknown option" 2 "unknown option" "$C" status --bogus
expect "zepsctl status, no --config" 2 "--config FILE is required" "$C" status
expect "zepsctl status, bad cluster file" 2 "syntax.conf:[0-9]+" "$C" status --config "$work/syntax.conf"
expect "zepsctl status, no shard answers (runtime)" 1 "shard 0 \\($ep\\) did not answer" \
    "$C" status --config "$good" --timeout 300
# one --timeout for the whole command (it waited it out twice: 6 s for 3000 ms)
t0=$(date +%s%N)
"$C" status --config "$good" >/dev/null 2>&1
ms=$((($(date +%s%N) - t0) / 1000000))
check "zepsctl status, no shard, default --timeout 3000: about 3 s, not twice that ($ms ms)" \
    test $ms -lt 5000
expect "zepsctl local, bad option value" 2 "--epochs wants" "$C" local --epochs x
expect "zepsctl local, bad cluster file" 2 "syntax.conf" "$C" local --config "$work/syntax.conf" \
    --dir "$work/localrun"
expect "zepsctl local --print-config with a run's option" 2 "--exec applies to a run" \
    "$C" local --print-config --exec true
# --print-config --metrics: every process serves /metrics on a port it logs
"$C" local --print-config --metrics >"$work/printed.conf" 2>&1
check "zepsctl local --print-config --metrics sets metrics_listen for shards and workers" \
    test "$(grep -c '^  metrics_listen = "127.0.0.1:0";' "$work/printed.conf")" = 2
"$S" -c "$work/printed.conf" --shard 0 >"$work/printed.log" 2>&1 &
printed=$!
pids+=("$printed")
check "a shard of that file logs its metrics port" wait_for "$work/printed.log" "metrics listening on" 20
kill -TERM "$printed"
wait "$printed"
expect "zepsctl local, run directory under a file" 2 "cannot make run directory" \
    "$C" local --dir "$work/afile/run"
mkdir -p "$work/lonely"
cp "$C" "$work/lonely/zepsctl"
expect "zepsctl local, zeps-server not found" 2 "cannot find zeps-server" \
    env PATH=/usr/bin:/bin "$work/lonely/zepsctl" local --dir "$work/lonelyrun"
expect "zepsctl snapshot inspect, no such path" 2 "nope: not found" "$C" snapshot inspect "$work/nope"
expect "zepsctl snapshot take, bad cluster file" 2 "syntax.conf" \
    "$C" snapshot take --config "$work/syntax.conf"
expect "zepsctl snapshot take, no shard answers (runtime)" 1 "cannot reach the cluster" \
    "$C" snapshot take --config "$good"
expect "zepsctl keygen, missing --name" 2 "--name NAME are required" "$C" keygen --out "$work"

# ---- the systemd units skip restarting on exactly the "must fix" statuses
units="$(dirname "${BASH_SOURCE[0]}")/../../deploy/systemd"
check "zeps-server@.service: RestartPreventExitStatus=2" \
    grep -qx "RestartPreventExitStatus=2" "$units/zeps-server@.service"
check "zeps-worker@.service: RestartPreventExitStatus=2 3" \
    grep -qx "RestartPreventExitStatus=2 3" "$units/zeps-worker@.service"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
