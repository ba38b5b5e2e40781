#!/usr/bin/env bash
# test_netns.sh - zeps across "hosts": network namespaces joined by veth pairs
# to a bridge that lives in its own namespace, with private 10.200.0.x
# addresses that exist only inside them. Two server hosts (s0, s1) and two
# worker hosts (w0, w1); every process runs in its host's namespace and binds
# or connects to that host's address. The servers bind non-loopback
# addresses, so the runs use CURVE keys (zepsctl keygen), except one that
# sets insecure = true.
#
# What it shows (each an "ok"/"FAIL" line):
#  a) BSP training across hosts finishes with host w0 capped by `tc tbf` and
#     host s0 dropping a share of incoming TCP packets (nftables numgen);
#  b) a worker host cut off (its link down) and reconnected: in async its
#     requests are retried and every push it made is applied exactly once;
#     in BSP the rounds wait for it and the result is bit-identical to (a);
#  c) a server host cut off and restored loses no acknowledged update: the
#     BSP result is bit-identical to (a) and each shard applied exactly
#     workers x iterations pushes.
# The partitions last PART_S seconds; the cluster file's request timeout
# and retry budget (REQ_MS x RETRIES) are sized well above that, since a
# client gives up after its retries (docs/operations.md).
#
# Needs root (namespaces, tc, nft): prints a SKIP line and exits 77 (ctest's
# "skipped", SKIP_RETURN_CODE) otherwise.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
export OPENBLAS_NUM_THREADS=1

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: test_netns.sh needs root (ip netns, tc, nft); not run"
    exit 77
fi
for tool in ip tc nft; do
    if ! command -v $tool >/dev/null; then
        echo "SKIP: '$tool' not found (bash deploy/install-deps.sh netns installs iproute2 and nftables); not run"
        exit 77
    fi
done

P="zn$$"                      # namespace prefix, unique per run
NET=10.200.0
HOSTS="s0 s1 w0 w1"
declare -A ADDR=([s0]=$NET.1 [s1]=$NET.2 [w0]=$NET.11 [w1]=$NET.12)
PART_S=3                      # partition length, seconds
REQ_MS=1000                   # request timeout ...
RETRIES=30                    # ... and retries: a 30 s budget, 10x a partition
ITER=150                      # BSP/async iterations per worker
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-netns-XXXXXX)
pids=()

cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    for h in $HOSTS br; do ip netns del "$P-$h" 2>/dev/null; done
    if [ -z "${ZEPS_TEST_KEEP:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

in_ns() { local h=$1; shift; ip netns exec "$P-$h" "$@"; }

# ---- the network ----------------------------------------------------------
if ! netns_setup 2>"$work/net.err"; then
    echo "SKIP: cannot build network namespaces here: $(head -1 "$work/net.err")"
    exit 77
fi
# the addresses exist only inside the namespaces (reachability is what (a) shows)
if ! ip -o addr | grep -q "$NET\." && [ "$(ip -n "$P-br" -o link show master br0 | wc -l)" -eq 4 ]; then
    ok "4 hosts on a bridge in its own namespace; ${ADDR[*]} absent from the root namespace"
else
    bad "network namespaces: bridge ports or addresses not as set up"
fi

# cut/heal a host: its link on the bridge side goes down/up
link_cut() { ip -n "$P-br" link set "$1" down; }
link_heal() { ip -n "$P-br" link set "$1" up; }

# ---- keys and cluster files -------------------------------------------------
mkdir -p "$work/keys" "$work/allow"
"$BIN/zepsctl" keygen --out "$work/keys" --name server >/dev/null 2>&1 &&
    "$BIN/zepsctl" keygen --out "$work/keys" --name worker >/dev/null 2>&1 &&
    cp "$work/keys/worker.pub" "$work/allow/" || { bad "zepsctl keygen"; exit 1; }

conf() { # name consistency curve(1/0) delay_ms
    local sec=""
    if [ "$3" = 1 ]; then
        sec="curve_server_secret = \"$work/keys/server.key\";
  curve_server_public = \"$work/keys/server.pub\";
  curve_client_secret = \"$work/keys/worker.key\";
  curve_client_public = \"$work/keys/worker.pub\";
  curve_allow_dir = \"$work/allow\";"
    else
        sec="insecure = true;"
    fi
    mkdir -p "$work/$1"
    cat >"$work/$1/cluster.conf" <<EOC
cluster = {
  servers = ["tcp://${ADDR[s0]}:17500", "tcp://${ADDR[s1]}:17500"];
  workers = 2;
  consistency = "$2";
  request_timeout_ms = $REQ_MS;
  max_retries = $RETRIES;
  hello_timeout_ms = 20000;
  $sec
};
training = {
  model = "quadratic"; epochs = 1; iterations = $ITER; dim = 300; condition = 50.0;
  optimizer = "sgd"; lr = 0.5; seed = 7; delay_ms = $4;
  result_dir = "$work/$1";
};
EOC
}

# start_run name: servers on s0, s1; workers 0, 1 on w0, w1. `ip netns exec`
# execs the program itself, so $! is the daemon's pid (a shell function run
# in the background would be a subshell instead).
start_run() {
    local d="$work/$1"
    ip netns exec "$P-s0" "$BIN/zeps-server" --config "$d/cluster.conf" --shard 0 >"$d/server-0.log" 2>&1 &
    spid0=$!
    ip netns exec "$P-s1" "$BIN/zeps-server" --config "$d/cluster.conf" --shard 1 >"$d/server-1.log" 2>&1 &
    spid1=$!
    ip netns exec "$P-w0" "$BIN/zeps-worker" --config "$d/cluster.conf" --rank 0 >"$d/worker-0.log" 2>&1 &
    wpid0=$!
    ip netns exec "$P-w1" "$BIN/zeps-worker" --config "$d/cluster.conf" --rank 1 >"$d/worker-1.log" 2>&1 &
    wpid1=$!
    pids+=("$spid0" "$spid1" "$wpid0" "$wpid1")
}


# wait_pid pid seconds: its exit status, or 124 after killing it at the deadline
wait_pid() {
    local end=$((SECONDS + $2))
    while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
    if kill -0 "$1" 2>/dev/null; then
        kill -KILL "$1"
        wait "$1" 2>/dev/null
        return 124
    fi
    wait "$1"
}

# finish_run name: wait for the workers, query the shards, stop the servers;
# sets wrc0 wrc1 (worker exits), src0 src1 (server exits), writes $d/stats.json
finish_run() {
    local d="$work/$1"
    wait_pid "$wpid0" 120; wrc0=$?
    wait_pid "$wpid1" 120; wrc1=$?
    in_ns w0 "$BIN/zepsctl" stats --config "$d/cluster.conf" --json >"$d/stats.json" 2>"$d/stats.err"
    kill -TERM "$spid0" "$spid1" 2>/dev/null
    wait_pid "$spid0" 15; src0=$?
    wait_pid "$spid1" 15; src1=$?
}
# both servers stopped cleanly (exit 0 on SIGTERM; an ASan build exits
# non-zero on a leak)
servers_ok() { [ "$src0" -eq 0 ] && [ "$src1" -eq 0 ]; }

# pushes applied per shard (table "x") from stats.json, as "n0 n1"
shard_pushes() {
    grep -o '"name": "x"[^}]*"pushes": [0-9]*' "$1" | grep -o '"pushes": [0-9]*' | awk '{printf "%s ", $2}'
}
# duplicate requests (retries that reached a shard twice) of every worker, summed
dups() {
    grep -o '"duplicates": [0-9]*' "$1" | awk '{s += $2} END {print s + 0}'
}
# worker 1's pushes as each shard counts them, as "n0 n1"
worker1_pushes() {
    grep -o '{"rank": 1, [^}]*' "$1" | grep -o '"pushes": [0-9]*' | awk '{printf "%s ", $2}'
}

# ---- a) rate cap and packet loss ---------------------------------------------
conf base bsp 1 2
in_ns w0 tc qdisc add dev eth0 root tbf rate 20mbit burst 32kb latency 100ms
in_ns s0 nft -f - <<'EON'
table inet zeps_loss {
    chain input {
        type filter hook input priority 0; policy accept;
        meta l4proto tcp numgen random mod 100 < 3 counter drop
    }
}
EON
t0=$SECONDS
start_run base
finish_run base
drops=$(in_ns s0 nft list ruleset | grep -o 'packets [0-9]*' | head -1 | awk '{print $2}')
cap=$(in_ns w0 tc -s qdisc show dev eth0 | grep -o 'Sent [0-9]* bytes' | head -1)
in_ns s0 nft delete table inet zeps_loss
in_ns w0 tc qdisc del dev eth0 root
base_loss=$(json_num "$work/base/worker-0.json" final_loss)
base_dist=$(json_num "$work/base/worker-0.json" final_distance)
if [ "$wrc0" -eq 0 ] && [ "$wrc1" -eq 0 ] && servers_ok && [ -n "$base_loss" ] && [ "${drops:-0}" -gt 0 ] \
    && grep -q '"curve": true' "$work/base/stats.json"; then
    ok "a) BSP across hosts with CURVE, w0 capped at 20 mbit ($cap), 3% loss on s0 ($drops packets dropped): finished in $((SECONDS - t0)) s, final loss $base_loss"
else
    bad "a) training across hosts (workers $wrc0/$wrc1, servers $src0/$src1, loss '${base_loss}', drops '${drops:-}'; logs in $work/base)"
fi

# partition name host: wait until training runs, cut `host` for PART_S s, heal;
# sets alive_after (1 if both workers were still running after the heal)
partition() {
    local d="$work/$1" host=$2
    if ! wait_for "$d/worker-0.log" "training quadratic" 30 || ! wait_for "$d/worker-1.log" "training quadratic" 30; then
        alive_after=0
        return
    fi
    sleep 0.5
    link_cut "$host"
    sleep "$PART_S"
    link_heal "$host"
    alive_after=0
    kill -0 "$wpid0" 2>/dev/null && kill -0 "$wpid1" 2>/dev/null && alive_after=1
}

# ---- b) a worker host cut off: BSP waits, result unchanged -------------------
conf bsp_w bsp 1 10
start_run bsp_w
partition bsp_w w1
finish_run bsp_w
loss=$(json_num "$work/bsp_w/worker-0.json" final_loss)
if [ "$wrc0" -eq 0 ] && [ "$wrc1" -eq 0 ] && servers_ok && [ "$alive_after" = 1 ] && [ "$loss" = "$base_loss" ]; then
    ok "b) BSP: worker host w1 cut off for ${PART_S} s mid-run; the rounds waited and the result is bit-identical to (a) (final loss $loss)"
else
    bad "b) BSP worker partition (workers $wrc0/$wrc1, servers $src0/$src1, overlapped $alive_after, loss '$loss' vs '$base_loss'; logs in $work/bsp_w)"
fi

# ---- b) a worker host cut off: async catches up (insecure = true, no keys) ---
conf async_w async 0 10
start_run async_w
partition async_w w1
finish_run async_w
w1p=$(worker1_pushes "$work/async_w/stats.json")
dup=$(dups "$work/async_w/stats.json")
if [ "$wrc0" -eq 0 ] && [ "$wrc1" -eq 0 ] && servers_ok && [ "$alive_after" = 1 ] && [ "$w1p" = "$ITER $ITER " ] \
    && [ "$dup" -gt 0 ] \
    && grep -q '"curve": false' "$work/async_w/stats.json"; then
    ok "b) async (insecure = true): worker host w1 cut off for ${PART_S} s and reconnected; its requests were retried ($dup duplicates recognised) and each shard applied exactly its $ITER pushes ($w1p)"
else
    bad "b) async worker partition (workers $wrc0/$wrc1, servers $src0/$src1, overlapped $alive_after, worker 1 pushes per shard '$w1p', want '$ITER $ITER ', duplicates $dup; logs in $work/async_w)"
fi

# ---- c) a server host cut off: nothing acknowledged is lost -------------------
conf bsp_s bsp 1 10
start_run bsp_s
partition bsp_s s1
finish_run bsp_s
loss=$(json_num "$work/bsp_s/worker-0.json" final_loss)
sp=$(shard_pushes "$work/bsp_s/stats.json")
dup=$(dups "$work/bsp_s/stats.json")
want="$((2 * ITER)) $((2 * ITER)) "
if [ "$wrc0" -eq 0 ] && [ "$wrc1" -eq 0 ] && servers_ok && [ "$alive_after" = 1 ] && [ "$loss" = "$base_loss" ] \
    && [ "$sp" = "$want" ] && [ "$dup" -gt 0 ]; then
    ok "c) server host s1 cut off for ${PART_S} s mid-run and restored: the workers' retries reached it ($dup duplicates recognised), each shard applied exactly $((2 * ITER)) pushes ($sp) and the result is bit-identical to (a) (final loss $loss)"
else
    bad "c) server partition (workers $wrc0/$wrc1, servers $src0/$src1, overlapped $alive_after, pushes per shard '$sp' want '$want', duplicates $dup, loss '$loss' vs '$base_loss'; logs in $work/bsp_s)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
