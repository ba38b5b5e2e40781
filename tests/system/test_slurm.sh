#!/usr/bin/env bash
# test_slurm.sh - deploy/slurm/zeps.sbatch on a real single-node Slurm
# cluster that this script starts (munged, slurmctld, slurmd from Debian's
# munge and slurm-wlm, each with its own key, socket, ports, state and logs
# in a temporary directory) and stops again, also on failure.
#
#   ZEPS_BINDIR=build/bin bash tests/system/test_slurm.sh           # full: the bar
#   ZEPS_SLURM_QUICK=1 ZEPS_BINDIR=... bash tests/system/test_slurm.sh   # short
#
# Full (ctest entry slurm in a normal build; ~1 min): the job of
# deploy/local/default.conf (2 shards, 4 workers, MLP on Fashion-MNIST,
# BSP, 30 epochs) must reach test accuracy >= 0.87. Quick (the same entry in
# a sanitizer build, where the full run would take several minutes): 2
# epochs on 8000 examples must reach >= 0.70: the same machinery
# (allocation, endpoints, multi-prog step, shutdown with snapshots).
# Both check: the job completes; the cluster file lists DNS names from the
# node list; each shard wrote a final snapshot on SIGTERM; nothing is left
# running. Then a replicated job (ZEPS_REPLICAS=2: 2 shards of 2 replicas
# and 2 workers, the short configuration, >= 0.70) on two nodes, two slurmd
# on this host named as the host and 127.0.0.2 (another loopback address;
# skipped if the host name does not resolve): the script's ZooKeeper on the
# first node serves the job and is gone after it, each shard's replicas are
# on different nodes and one of them was primary, the primaries wrote the
# final snapshots.
# Needs root (daemons and the slurm/munge users); skips otherwise.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
QUICK=${ZEPS_SLURM_QUICK:-0}

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: test_slurm.sh starts slurmctld, slurmd and munged and needs root"
    exit 77
fi
for p in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/sbatch; do
    [ -x "$p" ] || bash "$src/deploy/install-deps.sh" slurm
done
if [ "${ZEPS_HAVE_ZOOKEEPER:-ON}" != OFF ] && [ ! -f /usr/share/java/zookeeper.jar ]; then
    bash "$src/deploy/install-deps.sh" zk
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-slurm-XXXXXX)
chmod 755 "$dir"
pids=()
# Processes of the job that outlive their daemons: anything naming the
# temporary directory (the batch script, srun, zeps) and the slurmstepd
# processes of our slurmd (they carry its SLURM_CONF in their environment).
job_pids() {
    local p
    for p in $(pgrep -f -- "$dir/"); do
        [ "$p" != $$ ] && [ "$p" != "$BASHPID" ] && echo "$p"
    done
    for p in $(pgrep -x slurmstepd); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$dir/slurm.conf" && echo "$p"
    done
}
cleanup() {
    # Stop what this script started, by PID: the job first (cancelled while
    # slurmd can still end its steps), then slurmd, slurmctld and munged,
    # which run in the foreground as our children.
    local i p left
    if [ ${#pids[@]} -ge 3 ]; then
        timeout 5 scancel --quiet --full --user=root 2>/dev/null
        for _ in $(seq 1 40); do
            [ -z "$(timeout 3 squeue -h 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        p=${pids[i]}
        kill -TERM "$p" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    left=$(job_pids)
    if [ -n "$left" ]; then
        echo "cleanup: killing leftover job processes: $left"
        kill -KILL $left 2>/dev/null
    fi
    if [ -n "${ZEPS_TEST_KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# munge: a private daemon with its own key (in a 0700 directory) and socket
# (munged wants the socket's directory searchable by all).
mkdir -p "$dir/munge" "$dir/munge-run"
chown munge: "$dir/munge" "$dir/munge-run"
chmod 700 "$dir/munge"
chmod 755 "$dir/munge-run"
mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
chown munge: "$dir/munge/munge.key"
chmod 600 "$dir/munge/munge.key"
sock=$dir/munge-run/munge.socket
runuser -u munge -- /usr/sbin/munged --foreground --key-file="$dir/munge/munge.key" \
    --socket="$sock" --pid-file="$dir/munge-run/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" 2>"$dir/munged.err" &
pids+=($!)
for _ in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
check "munged started" test -S "$sock"

# Slurm: a node with 2 CPUs in partition zeps (the default), and for the
# replicated job a second node (a second slurmd on its own port), both in
# partition zeps2. The job's endpoints name the nodes, so both names must
# resolve to this host: this host's name and another loopback address.
# (A node named "localhost" cannot have a second node beside it: Slurm
# gives it this host's name as NodeHostname, and calls the next one a
# duplicate.) Without a resolvable host name: one node "localhost", and no
# replicated job.
ctld_port=$(free_port)
slurmd_port=$(free_port)
[ "$slurmd_port" = "$ctld_port" ] && slurmd_port=$((ctld_port + 1))
node1=$(hostname -s)
node2=127.0.0.2
if [ "$node1" = localhost ] || ! getent hosts "$node1" >/dev/null ||
    ! ip -4 addr show dev lo 2>/dev/null | grep -q 'inet 127.0.0.1/8'; then
    node1=localhost
    node2=""
fi
slurmd_port2=$((slurmd_port + 1))
while [ "$slurmd_port2" = "$ctld_port" ] || ss -Htln "sport = :$slurmd_port2" | grep -q .; do
    slurmd_port2=$((slurmd_port2 + 1))
done
mkdir -p "$dir/state" "$dir/spool" "$dir/log"
chown slurm: "$dir/state" "$dir/log"
cat >"$dir/slurm.conf" <<EOF
ClusterName=zepstest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
SlurmUser=slurm
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=5
NodeName=$node1 NodeAddr=127.0.0.1 CPUs=2 Port=$slurmd_port State=UNKNOWN
PartitionName=zeps Nodes=$node1 Default=YES MaxTime=INFINITE State=UP
EOF
if [ -n "$node2" ]; then
    cat >>"$dir/slurm.conf" <<EOF
NodeName=$node2 NodeAddr=127.0.0.1 CPUs=2 Port=$slurmd_port2 State=UNKNOWN
PartitionName=zeps2 Nodes=$node1,$node2 MaxTime=INFINITE State=UP
EOF
fi
export SLURM_CONF=$dir/slurm.conf
/usr/sbin/slurmctld -D -f "$SLURM_CONF" -i 2>"$dir/slurmctld.err" &
pids+=($!)
/usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$node1" 2>"$dir/slurmd.err" &
pids+=($!)
nodes=1
if [ -n "$node2" ]; then
    /usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$node2" 2>"$dir/slurmd-2.err" &
    pids+=($!)
    nodes=2
fi
idle=0
for _ in $(seq 1 60); do
    if [ "$(timeout 3 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | grep -c ' idle$')" -eq $nodes ]; then
        idle=1
        break
    fi
    sleep 0.25
done
check "slurmctld and $nodes slurmd up, nodes $node1${node2:+ and $node2} idle" test $idle -eq 1
if [ $idle -ne 1 ]; then
    tail -n 5 "$dir"/log/*.log "$dir"/*.err 2>/dev/null
    echo "$pass passed, $fail failed"
    exit 1
fi

# The job: the sbatch script as a user submits it, from the source tree.
run=$dir/run
extra=""
if [ "$QUICK" = 1 ]; then
    sed -e 's/epochs = 30;/epochs = 2;/' -e 's/seed = 1;/seed = 1;\n    max_train_examples = 8000;/' \
        "$src/deploy/slurm/cluster.conf.in" >"$dir/template.conf"
    bar=0.70
    limit=300
else
    cp "$src/deploy/slurm/cluster.conf.in" "$dir/template.conf"
    bar=0.87
    limit=1200
fi
# The shards bind tcp://*: the job runs with CURVE keys, as on a real cluster.
keys=$dir/keys
"$BIN/zepsctl" keygen --out "$keys" --name server >/dev/null
"$BIN/zepsctl" keygen --out "$keys" --name worker >/dev/null
mkdir -p "$keys/allowed" && cp "$keys/worker.pub" "$keys/allowed/"
sed -i -e "s|^cluster = {|cluster = {\n    curve_server_secret = \"$keys/server.key\";\n    curve_server_public = \"$keys/server.pub\";\n    curve_client_secret = \"$keys/worker.key\";\n    curve_client_public = \"$keys/worker.pub\";\n    curve_allow_dir = \"$keys/allowed\";|" \
    "$dir/template.conf"
port=$(free_port)
start=$(date +%s)
jobid=$(cd "$src" && ZEPS_BINDIR=$BIN ZEPS_RUN_DIR=$run ZEPS_TEMPLATE=$dir/template.conf \
    ZEPS_PORT_BASE=$port sbatch --parsable --ntasks=6 --output="$dir/job.out" \
    deploy/slurm/zeps.sbatch)
check "sbatch accepted the job ($jobid)" test -n "$jobid"
# Wait for job $1 (started at $2) to leave the queue, cancelling it after $3 s.
wait_job() {
    local state
    while :; do
        state=$(timeout 5 squeue -h -j "$1" -o '%T' 2>/dev/null)
        [ -z "$state" ] && break
        if [ $(($(date +%s) - $2)) -gt "$3" ]; then
            echo "job $1 still $state after $3 s: cancelling"
            scancel "$1"
            sleep 2
            break
        fi
        sleep 1
    done
}
wait_job "$jobid" "$start" "$limit"
elapsed=$(($(date +%s) - start))
sed 's/^/    job: /' "$dir/job.out" | tail -8
check "the job finished within $limit s (${elapsed} s) and the script reported success" \
    grep -q "4 of 4 workers finished" "$dir/job.out"
check "the job exited 0" bash -c "tail -1 '$dir/job.out' | grep -q 'step exit 0'"
acc=$(grep -o '"final_accuracy":[0-9.e-]*' "$run/results/worker-0.json" 2>/dev/null | cut -d: -f2)
check "rank 0 test accuracy ${acc:-none} >= $bar" \
    awk -v a="${acc:-0}" -v b="$bar" 'BEGIN { exit !(a >= b) }'
check "the cluster file names the shards by host name from the node list" \
    grep -q "servers = \[ \"tcp://$node1:$port\", \"tcp://$node1:$((port + 1))\" \];" \
    "$run/cluster.conf"
check "both shards wrote a final snapshot on SIGTERM" \
    bash -c "ls '$run'/snapshots/set-*/shard-0-of-2.zsnap '$run'/snapshots/set-*/shard-1-of-2.zsnap >/dev/null 2>&1"
check "the shards logged a clean stop" \
    bash -c "[ \$(cat '$run'/logs/task-0.log '$run'/logs/task-1.log | grep -c 'stopped') -ge 2 ]"
check "workers took their ranks from the multi-prog offset" \
    grep -q 'rank 3 of 4 (from --rank=3)' "$run/logs/task-5.log"
none_left() { ! pgrep -f -- "--config $run/" >/dev/null; }
check "no zeps process left" none_left

# A user's program as the workers (ZEPS_WORKER_CMD): the PyTorch example,
# 2 shards and 2 workers, one short epoch. Not in the sanitizer build: its
# libzeps.so cannot be loaded into a python3 built without ASan.
if [ "$QUICK" != 1 ] && [ -f "$BIN/../python/zeps/__init__.py" ]; then
    prun=$dir/prun
    port=$(free_port)
    start=$(date +%s)
    pjob=$(cd "$src" && ZEPS_BINDIR=$BIN ZEPS_RUN_DIR=$prun ZEPS_TEMPLATE=$dir/template.conf \
        ZEPS_PORT_BASE=$port PYTHONPATH="$BIN/../python" \
        ZEPS_WORKER_CMD="/usr/bin/python3 $src/worker/python/examples/mnist_mlp.py --epochs 1 --examples 8000" \
        sbatch --parsable --ntasks=4 --output="$dir/pjob.out" deploy/slurm/zeps.sbatch)
    check "sbatch accepted the Python job ($pjob)" test -n "$pjob"
    wait_job "$pjob" "$start" 300
    sed 's/^/    python job: /' "$dir/pjob.out" | tail -4
    check "the Python workers finished and the job exited 0" \
        bash -c "grep -q '2 of 2 workers finished' '$dir/pjob.out' && tail -1 '$dir/pjob.out' | grep -q 'step exit 0'"
    pacc=$(grep -oE '"final_accuracy": ?[0-9.e-]*' "$prun/results/worker-0.json" 2>/dev/null |
        cut -d: -f2 | tr -d ' ')
    check "the Python job's test accuracy ${pacc:-none} >= 0.70" \
        awk -v a="${pacc:-0}" 'BEGIN { exit !(a >= 0.70) }'
    check "the Python workers took their ranks from ZEPS_RANK" \
        bash -c "[ -s '$prun/results/worker-0.json' ] && [ -s '$prun/results/worker-1.json' ]"
fi

# Replicated shards (ZEPS_REPLICAS=2) on two nodes: the short configuration.
# (A build without the ZooKeeper client refuses replicas.)
if [ "${ZEPS_HAVE_ZOOKEEPER:-ON}" = OFF ]; then
    echo "# built without the ZooKeeper client: the replicated job was not run"
elif [ -n "$node2" ]; then
    if grep -q max_train_examples "$dir/template.conf"; then
        cp "$dir/template.conf" "$dir/template-short.conf"
    else
        sed -e 's/epochs = 30;/epochs = 2;/' -e 's/seed = 1;/seed = 1;\n    max_train_examples = 8000;/' \
            "$dir/template.conf" >"$dir/template-short.conf"
    fi
    rrun=$dir/rrun
    port=$(free_port)
    zkport=$(free_port)
    [ "$zkport" -ge "$port" ] && [ "$zkport" -lt $((port + 4)) ] && zkport=$((port + 4))
    mkdir -p "$dir/tmp"
    start=$(date +%s)
    rjob=$(cd "$src" && ZEPS_BINDIR=$BIN ZEPS_RUN_DIR=$rrun ZEPS_TEMPLATE=$dir/template-short.conf \
        ZEPS_PORT_BASE=$port ZEPS_REPLICAS=2 ZEPS_ZK_PORT=$zkport TMPDIR=$dir/tmp \
        sbatch --parsable --partition=zeps2 --nodes=2 --ntasks=6 --output="$dir/rjob.out" \
        deploy/slurm/zeps.sbatch)
    check "sbatch accepted the replicated job ($rjob)" test -n "$rjob"
    wait_job "$rjob" "$start" 400
    sed 's/^/    replicated job: /' "$dir/rjob.out" | tail -5
    check "the replicated job: ZooKeeper served on the first node" \
        grep -Eq "ZooKeeper serving at ($node1|$node2):$zkport " "$dir/rjob.out"
    check "  the workers finished and the job exited 0 ($(($(date +%s) - start)) s)" \
        bash -c "grep -q '2 of 2 workers finished' '$dir/rjob.out' && tail -1 '$dir/rjob.out' | grep -q 'step exit 0'"
    racc=$(grep -oE '"final_accuracy": ?[0-9.e-]*' "$rrun/results/worker-0.json" 2>/dev/null |
        cut -d: -f2 | tr -d ' ')
    check "  test accuracy ${racc:-none} >= 0.70" awk -v a="${racc:-0}" 'BEGIN { exit !(a >= 0.70) }'
    check "  the cluster file: replicas = 2, this job's ZooKeeper and name" \
        bash -c "grep -q '^    replicas = 2;' '$rrun/cluster.conf' &&
            grep -Eq 'zookeeper = \"($node1|$node2):$zkport\"; name = \"zeps-$rjob\"' '$rrun/cluster.conf'"
    # servers[i][r] is task r*S+i: on the host the host file gives that task.
    placement() {
        /usr/bin/python3 - "$rrun/cluster.conf" "$rrun/hostfile" <<'EOF'
import re, sys
conf = open(sys.argv[1]).read()
hosts = open(sys.argv[2]).read().split()
groups = re.findall(r"\[([^\]]*)\]", re.search(r"servers = \((.*)\);", conf).group(1))
shards = [re.findall(r'"tcp://([^:]+):(\d+)"', g) for g in groups]
ok = len(shards) == 2 and all(len(s) == 2 for s in shards)
for i, s in enumerate(shards):
    ok = ok and s[0][0] != s[1][0]                      # replicas on different nodes
    ok = ok and all(s[r][0] == hosts[r * 2 + i] for r in range(len(s)))
print("servers", shards, "host file", hosts)
sys.exit(0 if ok else 1)
EOF
    }
    check "  each shard's two replicas on different nodes, as the host file places the tasks" placement
    # The first role each replica took (at the end, the backup may be
    # elected while the step stops).
    roles_ok=1
    for i in 0 1; do
        first=$(for t in $i $((2 + i)); do
            grep -o 'role: [a-z]* -> [a-z]*' "$rrun/logs/task-$t.log" 2>/dev/null | head -1 | awk '{ print $4 }'
        done | sort | tr '\n' ' ')
        echo "    shard $i: first roles $first"
        [ "$first" = "backup primary " ] || roles_ok=0
    done
    check "  each shard's replicas began as one primary and one backup" test $roles_ok -eq 1
    check "  the primaries wrote the final snapshots" \
        bash -c "ls '$rrun'/snapshots/set-*/shard-0-of-2.zsnap '$rrun'/snapshots/set-*/shard-1-of-2.zsnap >/dev/null 2>&1"
    # (functions, not bash -c: pgrep -f would find the pattern in bash's own
    # command line)
    zk_gone() {
        ! pgrep -f -- "$dir/tmp/zeps-zookeeper" >/dev/null && [ -z "$(ls -A "$dir/tmp")" ] &&
            [ -s "$rrun/logs/zookeeper.log" ]
    }
    check "  ZooKeeper was stopped and its data removed" zk_gone
    rnone_left() { ! pgrep -f -- "--config $rrun/" >/dev/null; }
    check "  no zeps process left" rnone_left
else
    echo "# this host's name does not resolve: the two-node replicated job was not run"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
