#!/usr/bin/env bash
# test_deploy.sh - static checks of deploy/, each shown to fail on a broken
# copy of what it checks:
#   systemd     `systemd-analyze verify` of the units, with ExecStart=
#               pointed at the build's binaries (verify resolves ExecStart
#               on this machine, and the units name /usr/local/bin, where
#               nothing is installed while testing); any message fails,
#               since verify reports an unknown key but still exits 0.
#               `systemd-analyze security --offline` must rate them OK.
#               A short real run under strace: every system call of the
#               server and the worker is in the units' SystemCallFilter=,
#               and none maps memory writable and executable.
#               zeps-replica@.service: its command line, run with the
#               example replicas.env, takes shard and replica from them.
#   zookeeper   deploy/container/zookeeper-server.sh, three of them on
#               loopback as the Kubernetes StatefulSet runs them: one leader,
#               two followers, `ready` and `cli` answer; then two replicas of
#               a shard started by zeps-replica@.service's command line
#               against that ensemble, under strace: one primary, one
#               backup, a worker trains, every system call in the unit's
#               SystemCallFilter=.
#   cluster     the example cluster files parse as zeps reads them.
#   readiness   a worker with no shard up retries HELLO (logged) for
#               hello_timeout_ms and fails naming the shard; one started
#               before its shard (at a DNS name) waits and trains.
#   container   tests/system/deploy-check/check-dockerfile.js (no container engine
#               runs here: a static check, see that file for what it covers),
#               for the zeps image and the ZooKeeper image.
#   kubernetes  tests/system/deploy-check/validate-k8s.js: kubernetes-models schemas
#               plus a check for unknown fields (npm ci into the build dir).
#               The shards' readiness probe is GET /readyz on the port their
#               cluster file's metrics_listen names. The replicated variant
#               (deploy/kubernetes/replicated) the same, plus
#               check-k8s-replicated.js (the objects fit together: see there);
#               its cluster file parses and sizes agree; a pod named as the
#               StatefulSet names replica 1 takes replica 1 (root: unshare).
#   prometheus  deploy/prometheus: `promtool check rules` on the alert rules,
#               `promtool test rules` on the replicated-shard alerts
#               (deploy-check/zeps-alerts-test.yml), and `promtool check
#               config` on the scrape configs (the
#               Kubernetes one only parsed: Debian's prometheus is built
#               without kubernetes_sd); deploy/grafana's dashboard parses as
#               JSON and every zeps metric it or the rules name is exported.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
BUILD=${ZEPS_BUILD_DIR:-$(dirname "$BIN")}
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-deploy-XXXXXX)
# Processes started below are ended by PID; the directory goes too.
zkpids=()
rpids=()
trap 'kill -KILL ${wpid:-} ${spid:-} ${srv:-} ${st:-} ${rpids[*]} ${zkpids[*]} 2>/dev/null; rm -rf "$work"' EXIT
fails() { ! "$@"; }
quiet() { "$@" >/dev/null 2>&1; }

# ---------------------------------------------------------------- systemd
if ! command -v systemd-analyze >/dev/null; then
    bash "$src/deploy/install-deps.sh" tests
fi
# Copy the units with ExecStart= pointed at the build; nothing else changes.
units=$work/units
mkdir -p "$units"
for u in "$src"/deploy/systemd/*.service; do
    sed "s#^ExecStart=/usr/local/bin/#ExecStart=$BIN/#" "$u" >"$units/$(basename "$u")"
done
# verify: exit 0 and not a word on stderr/stdout (unknown keys only warn).
verify() { # dir instance...
    local dir=$1 out
    shift
    out=$(cd "$dir" && systemd-analyze verify --man=no "${@/#/./}" 2>&1)
    local rc=$?
    [ -n "$out" ] && printf '    %s\n' "$out" | head -5
    [ $rc -eq 0 ] && [ -z "$out" ]
}
check "systemd-analyze verify: zeps-server@0, zeps-worker@3 and zeps-replica@1, no message" \
    verify "$units" zeps-server@0.service zeps-worker@3.service zeps-replica@1.service
for u in zeps-server@0.service zeps-worker@1.service zeps-replica@1.service; do
    (cd "$units" && systemd-analyze security --offline=yes --threshold=25 --no-pager "./$u") \
        >"$work/sec.out" 2>&1
    rc=$?
    level=$(grep -o 'exposure level for [^:]*: [0-9.]* [A-Z]*' "$work/sec.out")
    check "systemd-analyze security: $level (threshold 2.5)" test $rc -eq 0
done
# The check can fail: a misspelt key, a missing binary, an unknown section.
mut=$work/mut
mkdir -p "$mut"
cp "$units"/*.service "$mut/"
sed -i 's/^ProtectSystem=strict/ProtectSytem=strict/' "$mut/zeps-server@.service"
check "verify fails on an unknown key (ProtectSytem=)" fails verify "$mut" zeps-server@0.service
cp "$src/deploy/systemd/zeps-worker@.service" "$mut/"
sed -i "s#^ExecStart=/usr/local/bin/#ExecStart=$work/nonexistent/#" "$mut/zeps-worker@.service"
check "verify fails on a missing executable" fails verify "$mut" zeps-worker@0.service
cp "$units"/*.service "$mut/"
printf '\n[Servce]\nFoo=1\n' >>"$mut/zeps-worker@.service"
check "verify fails on an unknown section" fails verify "$mut" zeps-worker@0.service

# The replica unit's command line, with %i = 1 and the example replicas.env
# as its EnvironmentFile=, on the example cluster file (its folders moved
# under $work): shard 1, replica 1 (zeps-a's). It stops at the missing
# CURVE keys (exit 2), after saying who it is. Without the file's line the
# replica is refused, naming the variable.
replica_cmd() { # instance, env file, log: run the unit's ExecStart as systemd would
    local cmd
    cmd=$(sed -n 's/^ExecStart=//p' "$units/zeps-replica@.service")
    cmd=${cmd//%i/$1}
    cmd=${cmd//\/etc\/zeps\/cluster.conf/$work/repl-example.conf}
    (set -a && . "$2" && set +a && exec $cmd) >"$3" 2>&1
}
sed "s#/var/lib/zeps#$work/var#g" "$src/deploy/systemd/cluster-replicated.conf" >"$work/repl-example.conf"
replica_cmd 1 "$src/deploy/systemd/replicas.env" "$work/replica-unit.log"
rc=$?
check "zeps-replica@1 with the example replicas.env: shard 1, replica 1 (exit $rc at the keys)" \
    bash -c "[ $rc -eq 2 ] && grep -q 'shard index 1 of 2 (from --shard=1)' '$work/replica-unit.log' &&
        grep -q 'replica 1 of 2 (from \$ZEPS_REPLICA_1=1 (--replica))' '$work/replica-unit.log'"
grep -v '^ZEPS_REPLICA_1=' "$src/deploy/systemd/replicas.env" >"$work/replicas-0.env"
replica_cmd 1 "$work/replicas-0.env" "$work/replica-unit0.log"
rc=$?
check "  and without ZEPS_REPLICA_1 it exits 2 naming it (exit $rc)" \
    bash -c "[ $rc -eq 2 ] && grep -q 'ZEPS_REPLICA_1 is not set' '$work/replica-unit0.log'"

# The syscall filter of the units lets the daemons work: every system call
# a server and a worker make in a short real run (traced with strace) is in
# the unit's SystemCallFilter= set, expanded through its nested groups.
filter=$(sed -n 's/^SystemCallFilter=//p' "$src/deploy/systemd/zeps-server@.service")
expand_filter() { # groups... -> the system calls they allow, one a line
    systemd-analyze syscall-filter --no-pager 2>/dev/null | awk -v root="$*" '
        /^@/ { g = $1; next }
        /^    #/ { next }
        /^    / { m[g] = m[g] " " $1 }
        END {
            n = split(root, q, " ")
            for (i = 1; i <= n; i++) seen[q[i]] = 1
            while (n > 0) {
                cur = q[n--]
                k = split(m[cur], it, " ")
                for (i = 1; i <= k; i++) {
                    if (it[i] !~ /^@/) print it[i]
                    else if (!seen[it[i]]) { seen[it[i]] = 1; q[++n] = it[i] }
                }
            }
        }' | sort -u
}
if [ "${ZEPS_ASAN:-OFF}" = ON ]; then
    # The sanitizer runtime (LeakSanitizer's ptrace, under strace too) is
    # not what the units run: check the normal build only.
    echo "# sanitizer build: syscall filter check not run"
elif command -v strace >/dev/null; then
    sc=$work/sc
    mkdir -p "$sc"
    sport=$((20000 + RANDOM % 20000))
    printf '%s\n' \
        "cluster = { servers = [\"tcp://127.0.0.1:$sport\"]; workers = 1; snapshot_dir = \"$sc/snap\"; };" \
        "training = { model = \"softmax\"; epochs = 1; max_train_examples = 2000; result_dir = \"$sc\"; };" \
        >"$sc/c.conf"
    strace -f -qq -o "$sc/server.trace" "$BIN/zeps-server" --config "$sc/c.conf" --shard 0 \
        >"$sc/server.log" 2>&1 &
    st=$!
    timeout 120 strace -f -qq -o "$sc/worker.trace" "$BIN/zeps-worker" --config "$sc/c.conf" \
        --rank 0 >"$sc/worker.log" 2>&1
    wrc=$?
    srv=$(pgrep -P $st)
    [ -n "$srv" ] && kill -TERM $srv
    for _ in $(seq 1 100); do kill -0 $st 2>/dev/null || break; sleep 0.1; done
    kill -KILL $st $srv 2>/dev/null
    wait $st 2>/dev/null
    check "traced run: the worker trained (exit $wrc), the server stopped with a snapshot" \
        bash -c "[ $wrc -eq 0 ] && grep -q 'final snapshot' '$sc/server.log'"
    expand_filter $filter >"$sc/allowed"
    for t in server worker; do
        grep -oE '^[0-9]+ +[a-z_0-9]+\(' "$sc/$t.trace" | awk '{ print $2 }' | tr -d '(' |
            sort -u >"$sc/$t.used"
        comm -23 "$sc/$t.used" "$sc/allowed" >"$sc/$t.denied"
        check "all $(wc -l <"$sc/$t.used") system calls of the $t are in SystemCallFilter=$filter" \
            test ! -s "$sc/$t.denied" -a -s "$sc/$t.used"
        [ -s "$sc/$t.denied" ] && sed 's/^/    denied: /' "$sc/$t.denied"
        # MemoryDenyWriteExecute=yes refuses writable+executable maps and
        # making memory executable after the fact.
        check "the $t maps no memory writable and executable (MemoryDenyWriteExecute)" \
            test "$(grep -cE 'PROT_WRITE\|PROT_EXEC|mprotect\([^,]*, [^,]*, [A-Z_|]*PROT_EXEC' \
                "$sc/$t.trace")" -eq 0
    done
    # The comparison can fail: a filter without networking denies some.
    expand_filter @basic-io @file-system >"$sc/narrow"
    check "the comparison fails for a narrower filter (@basic-io @file-system)" \
        test -n "$(comm -23 "$sc/server.used" "$sc/narrow")"
else
    echo "# strace not found: syscall filter check not run"
fi

# ---------------------------------------------------------------- cluster files
# A process parses the file, then refuses an index outside it: exit 2 with
# "outside the cluster" proves the file itself was accepted.
parses() { # file, expected "N workers"
    "$BIN/zeps-worker" --config "$1" --rank 4095 >"$work/parse.out" 2>&1
    local rc=$?
    grep -q "outside the cluster of $2 workers" "$work/parse.out" && [ $rc -eq 2 ] ||
        { sed 's/^/    /' "$work/parse.out"; return 1; }
}
check "deploy/systemd/cluster.conf is a valid cluster file" \
    parses "$src/deploy/systemd/cluster.conf" 8
check "deploy/systemd/cluster-replicated.conf is a valid cluster file" \
    parses "$src/deploy/systemd/cluster-replicated.conf" 8

# ---------------------------------------------------------------- readiness
# Engines start pods and tasks in any order: a worker waits for every shard's
# HELLO, logging each retry, for cluster.hello_timeout_ms, then fails naming
# the shard; a shard that comes up in time (here at a DNS name) is used.
rd=$work/ready
mkdir -p "$rd"
rport=$((20000 + RANDOM % 20000))
ready_conf() { # file, endpoint, hello_timeout_ms
    printf '%s\n' \
        "cluster = { servers = [\"$2\"]; binds = [\"tcp://127.0.0.1:$rport\"]; workers = 1;" \
        "            hello_timeout_ms = $3; };" \
        "training = { model = \"quadratic\"; iterations = 50; dim = 10; result_dir = \"$rd\"; };" >"$1"
}
ready_conf "$rd/nobody.conf" "tcp://127.0.0.1:$rport" 2500
t0=$(date +%s%N)
timeout 60 "$BIN/zeps-worker" --config "$rd/nobody.conf" --rank 0 >"$rd/nobody.log" 2>&1
wrc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "with no shard up the worker fails (exit $wrc) after hello_timeout_ms 2500 (took $ms ms)" \
    bash -c "[ $wrc -ne 0 ] && [ $ms -ge 2000 ] && [ $ms -lt 15000 ]"
check "it logged each retry" grep -q "waiting for shard 0 at tcp://127.0.0.1:$rport (attempt 2 of 3)" \
    "$rd/nobody.log"
check "and named the shard that never answered" grep -q "shard 0 at tcp://127.0.0.1:$rport did not answer" \
    "$rd/nobody.log"
ready_conf "$rd/late.conf" "tcp://localhost:$rport" 30000
"$BIN/zeps-worker" --config "$rd/late.conf" --rank 0 >"$rd/late-worker.log" 2>&1 &
wpid=$!
for _ in $(seq 1 100); do grep -q "waiting for shard 0" "$rd/late-worker.log" && break; sleep 0.1; done
"$BIN/zeps-server" --config "$rd/late.conf" --shard 0 >"$rd/late-server.log" 2>&1 &
spid=$!
wrc=124
for _ in $(seq 1 600); do
    if ! kill -0 $wpid 2>/dev/null; then wait $wpid; wrc=$?; break; fi
    sleep 0.1
done
kill -TERM $wpid $spid 2>/dev/null
wait $spid 2>/dev/null
check "a worker started before its shard (at a DNS name) waits, then trains (exit $wrc)" \
    bash -c "[ $wrc -eq 0 ] && grep -q 'waiting for shard 0 at tcp://localhost:$rport' '$rd/late-worker.log'"

# ---------------------------------------------------------------- container
checker=$src/tests/system/deploy-check
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    bad "Node.js and npm are needed for the container and Kubernetes checks"
    echo "$pass passed, $fail failed"
    exit 1
fi
check "Dockerfile: syntax, stages, context, non-root runtime with the libraries the binaries need" \
    node "$checker/check-dockerfile.js" "$src/deploy/container/Dockerfile" "$src" \
    "$BIN/zeps-server" "$BIN/zeps-worker" "$BIN/zepsctl"
sed 's/^USER 10001:10001/USER root/' "$src/deploy/container/Dockerfile" >"$work/Dockerfile.root"
check "the Dockerfile check fails on a root runtime user" \
    fails node "$checker/check-dockerfile.js" "$work/Dockerfile.root" "$src"
sed 's/ libuv1 / /' "$src/deploy/container/Dockerfile" >"$work/Dockerfile.nouv"
check "the Dockerfile check fails when a runtime library is missing (libuv1)" \
    fails node "$checker/check-dockerfile.js" "$work/Dockerfile.nouv" "$src" "$BIN/zeps-server"
sed 's/^COPY --from=build/COPY --from=builder/; s/^RUN ldconfig/RUNN ldconfig/' \
    "$src/deploy/container/Dockerfile" >"$work/Dockerfile.bad"
check "the Dockerfile check fails on an unknown stage and instruction" \
    fails node "$checker/check-dockerfile.js" "$work/Dockerfile.bad" "$src"
zkdf=$src/deploy/container/zookeeper.Dockerfile
zkopts=(--single-stage --volume /var/lib/zookeeper --installs libzookeeper-java --installs default-jre-headless)
check "zookeeper.Dockerfile: syntax, context, non-root, the ZooKeeper jars and a JRE" \
    node "$checker/check-dockerfile.js" "${zkopts[@]}" "$zkdf" "$src"
sed 's/^USER 10001:10001/USER 0/' "$zkdf" >"$work/zk.root"
check "  fails on a root user" fails quiet node "$checker/check-dockerfile.js" "${zkopts[@]}" "$work/zk.root" "$src"
sed 's/ default-jre-headless / /' "$zkdf" >"$work/zk.nojre"
check "  fails without the JRE" fails quiet node "$checker/check-dockerfile.js" "${zkopts[@]}" "$work/zk.nojre" "$src"
sed 's#^COPY deploy/container/zookeeper-server.sh#COPY deploy/container/zk-server.sh#' "$zkdf" >"$work/zk.nosrc"
check "  fails on a COPY source not in the context" \
    fails quiet node "$checker/check-dockerfile.js" "${zkopts[@]}" "$work/zk.nosrc" "$src"
check "  it installs zookeeper-server.sh as the zookeeper-server the StatefulSet runs" \
    bash -c "grep -qx 'COPY deploy/container/zookeeper-server.sh /usr/local/bin/zookeeper-server' '$zkdf' &&
        grep -q 'command: \[\"zookeeper-server\", \"run\"\]' '$src/deploy/kubernetes/replicated/zookeeper.yaml' &&
        grep -q 'command: \[\"zookeeper-server\", \"ready\"\]' '$src/deploy/kubernetes/replicated/zookeeper.yaml'"

# ---------------------------------------------------------------- kubernetes
# npm ci into the build dir, again only when the lock file changed.
nm=$BUILD/deploy-check
if ! cmp -s "$checker/package-lock.json" "$nm/package-lock.json" || [ ! -d "$nm/node_modules" ]; then
    mkdir -p "$nm"
    cp "$checker/package.json" "$checker/package-lock.json" "$nm/"
    (cd "$nm" && npm ci --no-audit --no-fund --loglevel=error) >"$work/npm.out" 2>&1 ||
        { cat "$work/npm.out"; rm -f "$nm/package-lock.json"; }
fi
cp "$checker/validate-k8s.js" "$nm/"
k8s=$src/deploy/kubernetes
check "Kubernetes manifests pass the schemas and have no unknown field" \
    node "$nm/validate-k8s.js" "$k8s"/*.yaml
sed 's/^  replicas: 2/  replicas: "2"/' "$k8s/statefulset.yaml" >"$work/wrong-type.yaml"
node "$nm/validate-k8s.js" "$work/wrong-type.yaml" >"$work/v1.out" 2>&1
check "the validator fails on a wrong type (replicas: \"2\")" \
    grep -q '/spec/replicas: must be of type integer' "$work/v1.out"
sed 's/readinessProbe:/readinesProbe:/' "$k8s/statefulset.yaml" >"$work/unknown.yaml"
node "$nm/validate-k8s.js" "$work/unknown.yaml" >"$work/v2.out" 2>&1
check "the validator fails on an unknown field (readinesProbe)" \
    grep -q "containers/0/readinesProbe: unknown field" "$work/v2.out"
sed 's/completionMode: Indexed/completionMode: Indexd/' "$k8s/job.yaml" >"$work/enum.yaml"
check "the validator fails on a bad enum value (completionMode: Indexd)" \
    fails node "$nm/validate-k8s.js" "$work/enum.yaml"
# The ConfigMap's cluster file parses, and agrees with the StatefulSet and Job.
node -e '
const y = require(process.argv[1] + "/node_modules/js-yaml");
const fs = require("fs");
const d = (f) => y.load(fs.readFileSync(process.argv[2] + "/" + f, "utf8"));
fs.writeFileSync(process.argv[3] + "/k8s.conf", d("configmap.yaml").data["cluster.conf"]);
console.log(d("statefulset.yaml").spec.replicas, d("job.yaml").spec.completions);
' "$nm" "$k8s" "$work" >"$work/k8s-sizes" 2>&1
read -r replicas completions <"$work/k8s-sizes"
check "the ConfigMap's cluster.conf is a valid cluster file with ${completions:-?} workers" \
    parses "$work/k8s.conf" "${completions:-x}"
"$BIN/zeps-server" --config "$work/k8s.conf" --shard 255 >"$work/shards.out" 2>&1
check "its servers match the StatefulSet's ${replicas:-?} replicas" \
    grep -q "outside the cluster of ${replicas:-x} shards" "$work/shards.out"

node -e '
const y = require(process.argv[1] + "/node_modules/js-yaml");
const fs = require("fs");
const s = y.load(fs.readFileSync(process.argv[2] + "/statefulset.yaml", "utf8"));
const c = s.spec.template.spec.containers[0];
const port = c.ports.find((p) => p.name === c.readinessProbe.httpGet.port);
console.log(c.readinessProbe.httpGet.path, port ? port.containerPort : "none",
            s.spec.template.metadata.annotations["prometheus.io/port"]);
' "$nm" "$k8s" >"$work/probe" 2>&1
read -r probe_path probe_port ann_port <"$work/probe"
check "the StatefulSet's readiness probe is GET /readyz ($probe_path on $probe_port)" \
    test "$probe_path" = /readyz
check "  on the port of the ConfigMap's metrics_listen and the scrape annotation ($ann_port)" \
    grep -q "metrics_listen = \"0.0.0.0:${probe_port}\"" "$work/k8s.conf"
check "  (annotation port)" test "$ann_port" = "$probe_port"

# The replicated variant: schemas, then how its objects fit together.
rk=$k8s/replicated
check "replicated manifests pass the schemas and have no unknown field" \
    node "$nm/validate-k8s.js" "$rk"/*.yaml
sed 's/maxUnavailable: 1/maxUnavailabe: 1/' "$rk/pdb.yaml" >"$work/pdb-typo.yaml"
check "  (and fail on an unknown field of a PodDisruptionBudget)" \
    fails quiet node "$nm/validate-k8s.js" "$work/pdb-typo.yaml"
cp "$checker/check-k8s-replicated.js" "$nm/"
mkdir -p "$work/rk"
node "$nm/check-k8s-replicated.js" "$rk" "$k8s" "$work/rk" >"$work/rk.out" 2>&1
rc=$?
sed '$d' "$work/rk.out" | sed 's/^/    /'
read -r rshards rreplicas rcompletions < <(tail -1 "$work/rk.out")
check "the replicated objects fit together: $rshards shards of $rreplicas replicas, names, anti-affinity, budgets, ZooKeeper" \
    test $rc -eq 0
# The check fails on each kind of mismatch.
mutate_rk() { # description, file, sed expression
    rm -rf "$work/rkm" && cp -r "$rk" "$work/rkm" && sed -i "$3" "$work/rkm/$2"
    check "  and fails on $1" fails quiet node "$nm/check-k8s-replicated.js" "$work/rkm" "$k8s" "$work/rk"
}
mutate_rk "a server endpoint that names no pod" configmap.yaml 's/zeps-shard-1-1\.zeps/zeps-shard-1-2.zeps/'
mutate_rk "an anti-affinity that does not select the shard's own pods" statefulset.yaml \
    's/^                  zeps\/shard: "1"$/                  zeps\/shard: "0"/'
mutate_rk "a ZooKeeper ensemble that names a missing pod" zookeeper.yaml 's/zookeeper-2\.zookeeper-hs/zookeeper-3.zookeeper-hs/'
mutate_rk "a coordination address that is no ZooKeeper Service" configmap.yaml 's/"zookeeper:2181"/"zookeeper-hs:2181"/'
mutate_rk "a budget that lets a drain take both replicas" pdb.yaml '0,/maxUnavailable: 1/ s/maxUnavailable: 1/maxUnavailable: 2/'
mutate_rk "a Job that is not the default's" job.yaml 's/completions: 4/completions: 3/'
check "the replicated cluster.conf is a valid cluster file with ${rcompletions:-?} workers (the Job's)" \
    parses "$work/rk/cluster.conf" "${rcompletions:-x}"
"$BIN/zeps-server" --config "$work/rk/cluster.conf" --shard 255 --replica 0 >"$work/rshards.out" 2>&1
check "  its servers are the ${rshards:-?} shard StatefulSets" \
    grep -q "outside the cluster of ${rshards:-x} shards" "$work/rshards.out"
"$BIN/zeps-server" --config "$work/rk/cluster.conf" --shard 0 --replica "${rreplicas:-0}" >"$work/rrepl.out" 2>&1
check "  each as wide as their ${rreplicas:-?} replicas" \
    grep -q "replica index ${rreplicas:-x} is outside the ${rreplicas:-x} replica(s)" "$work/rrepl.out"
# The replica from the pod's host name, as the StatefulSet names its pods
# (in a UTS namespace of its own); it stops at the missing keys, exit 2.
if [ "$(id -u)" -eq 0 ] && unshare -u true 2>/dev/null; then
    sed "s#/var/lib/zeps#$work/var#g" "$work/rk/cluster.conf" >"$work/rk/local.conf"
    unshare -u sh -c "hostname zeps-shard-1-1 && exec '$BIN/zeps-server' --config '$work/rk/local.conf' \
        --shard 1 --replica hostname" >"$work/rhost.out" 2>&1
    check "pod zeps-shard-1-1 (--shard 1 --replica hostname) is shard 1, replica 1" \
        grep -q 'replica 1 of 2 (from host name zeps-shard-1-1)' "$work/rhost.out"
else
    echo "# not root (or no unshare): the host-name replica check not run"
fi
if command -v kubectl >/dev/null; then
    for d in "$k8s" "$rk"; do
        check "kubectl kustomize renders $(basename "$d")" bash -c "kubectl kustomize '$d' >'$work/render.yaml' 2>&1"
    done
else
    echo "# kubectl not found: the kustomizations were not rendered"
fi

# ---------------------------------------------------------------- zookeeper
# zookeeper-server.sh as the StatefulSet runs it (ZK_ENSEMBLE of three, the
# myid from the host name), on loopback ports instead of pod names.
zks=$src/deploy/container/zookeeper-server.sh
check "zookeeper-server.sh is valid bash" bash -n "$zks"
if command -v shellcheck >/dev/null; then
    check "  and shellcheck finds no warning in it or in deploy/slurm/zeps.sbatch" \
        shellcheck -S warning "$zks" "$src/deploy/slurm/zeps.sbatch"
else
    echo "# shellcheck not found: not run"
fi
[ -f /usr/share/java/zookeeper.jar ] || bash "$src/deploy/install-deps.sh" zk
check "Debian's ZooKeeper is installed (install-deps.sh zk)" test -f /usr/share/java/zookeeper.jar
zkc=() zkq=() zke=()
for i in 0 1 2; do
    zkc[i]=$(free_port)
    zkq[i]=$((zkc[i] + 1))
    zke[i]=$((zkc[i] + 2))
done
ens="127.0.0.1:${zkq[0]}:${zke[0]},127.0.0.1:${zkq[1]}:${zke[1]},127.0.0.1:${zkq[2]}:${zke[2]}"
for i in 0 1 2; do
    HOSTNAME=zookeeper-$i ZK_ENSEMBLE=$ens ZK_CLIENT_PORT=${zkc[i]} ZK_DATA_DIR=$work/zk$i \
        ZK_TICK_MS=200 ZK_HEAP=96m bash "$zks" run >"$work/zk$i.log" 2>&1 &
    zkpids+=($!)
done
zk_ready() { # index: the ready command's mode line
    ZK_CLIENT_PORT=${zkc[$1]} bash "$zks" ready 2>/dev/null
}
modes=
for _ in $(seq 1 300); do
    modes=$(for i in 0 1 2; do zk_ready $i; done | sort | tr '\n' ' ')
    [ "$modes" = "Mode: follower Mode: follower Mode: leader " ] && break
    sleep 0.2
done
check "three zookeeper-server run: one leader, two followers (${modes:-none ready})" \
    test "$modes" = "Mode: follower Mode: follower Mode: leader "
check "  each took its myid from its host name (zookeeper-<i> is i+1)" \
    bash -c "[ \"\$(cat '$work'/zk0/data/myid '$work'/zk1/data/myid '$work'/zk2/data/myid | tr -d '\n')\" = 123 ]"
ZK_CLIENT_PORT=${zkc[1]} bash "$zks" cli ls / >"$work/zkcli.out" 2>&1
check "  zookeeper-server cli ls / answers" grep -q '^\[zookeeper\]' "$work/zkcli.out"
check "  ready fails where nothing serves" fails env ZK_CLIENT_PORT="$(free_port)" bash "$zks" ready
HOSTNAME=zookeeper ZK_ENSEMBLE=$ens ZK_DATA_DIR=$work/zkbad bash "$zks" run >"$work/zkbad.log" 2>&1
check "  run refuses a host name without an ordinal" grep -q 'does not end in an ordinal' "$work/zkbad.log"

# Two replicas of shard 0 started by zeps-replica@.service's command line
# (replicas.env as on two hosts), against this ensemble, under strace.
# (A build without the ZooKeeper client refuses replicas: ctest passes
# ZEPS_HAVE_ZOOKEEPER.)
if [ "${ZEPS_HAVE_ZOOKEEPER:-ON}" != OFF ] && [ "${ZEPS_ASAN:-OFF}" != ON ] &&
    command -v strace >/dev/null && [ "$modes" = "Mode: follower Mode: follower Mode: leader " ]; then
    rs=$work/rs
    mkdir -p "$rs"
    p0=$(free_port)
    p1=$(free_port)
    [ "$p1" = "$p0" ] && p1=$((p0 + 1))
    cat >"$rs/cluster.conf" <<EOF
cluster = {
    replicas = 2;
    servers = ( [ "tcp://127.0.0.1:$p0", "tcp://127.0.0.1:$p1" ] );
    coordination = {
        zookeeper = "127.0.0.1:${zkc[0]},127.0.0.1:${zkc[1]},127.0.0.1:${zkc[2]}";
        name = "deploy-test-$$";
        session_timeout_ms = 2000;
    };
    workers = 1;
    snapshot_dir = "$rs/snap";
};
training = { model = "softmax"; epochs = 1; max_train_examples = 2000; result_dir = "$rs"; };
EOF
    sed "s#/etc/zeps/cluster.conf#$rs/cluster.conf#" "$units/zeps-replica@.service" >"$rs/unit"
    rcmd=$(sed -n 's/^ExecStart=//p' "$rs/unit")
    rfilter=$(sed -n 's/^SystemCallFilter=//p' "$rs/unit")
    expand_filter $rfilter >"$rs/allowed"
    rcmd=${rcmd//%i/0}
    for r in 0 1; do
        # shellcheck disable=SC2086 # the unit's command line, split as systemd splits it
        ZEPS_REPLICA_0=$r strace -f -qq -o "$rs/replica$r.trace" $rcmd >"$rs/replica$r.log" 2>&1 &
        rpids+=($!)
        [ $r -eq 0 ] && wait_for "$rs/replica0.log" 'role: none -> primary' 30
    done
    wait_for "$rs/replica1.log" 'role: none -> backup' 30
    check "zeps-replica@0 on two hosts: replica 0 primary, replica 1 backup" \
        bash -c "grep -q 'role: none -> primary' '$rs/replica0.log' && grep -q 'role: none -> backup' '$rs/replica1.log'"
    timeout 120 "$BIN/zeps-worker" --config "$rs/cluster.conf" --rank 0 >"$rs/worker.log" 2>&1
    wrc=$?
    check "  a worker trained against them (exit $wrc)" test $wrc -eq 0
    rrc=()
    for r in 0 1; do
        kid=$(pgrep -P "${rpids[r]}")
        [ -n "$kid" ] && kill -TERM $kid
    done
    for r in 0 1; do
        for _ in $(seq 1 100); do kill -0 "${rpids[r]}" 2>/dev/null || break; sleep 0.1; done
        wait "${rpids[r]}"
        rrc[r]=$?
    done
    rpids=()
    check "  SIGTERM stopped both (exit ${rrc[*]})" test "${rrc[*]}" = "0 0"
    for r in 0 1; do
        grep -oE '^[0-9]+ +[a-z_0-9]+\(' "$rs/replica$r.trace" | awk '{ print $2 }' | tr -d '(' |
            sort -u >"$rs/replica$r.used"
        comm -23 "$rs/replica$r.used" "$rs/allowed" >"$rs/replica$r.denied"
        check "  all $(wc -l <"$rs/replica$r.used") system calls of replica $r are in SystemCallFilter=$rfilter" \
            test ! -s "$rs/replica$r.denied" -a -s "$rs/replica$r.used"
        [ -s "$rs/replica$r.denied" ] && sed 's/^/    denied: /' "$rs/replica$r.denied"
    done
else
    echo "# no ZooKeeper client, a sanitizer build, no strace or no ensemble: the replica pair was not run"
fi
for p in "${zkpids[@]}"; do kill -TERM "$p" 2>/dev/null; done
for p in "${zkpids[@]}"; do wait "$p" 2>/dev/null; done
zkpids=()

# ---------------------------------------------------------------- prometheus
prom=$src/deploy/prometheus
check "promtool check rules passes on deploy/prometheus/zeps-alerts.yml" \
    promtool check rules "$prom/zeps-alerts.yml"
sed 's/expr: increase(zeps_lost_workers_total\[5m\]) > 0/expr: increase(zeps_lost_workers_total[5m] > 0/' \
    "$prom/zeps-alerts.yml" >"$work/bad-alerts.yml"
check "  and fails on a broken expression" fails promtool check rules "$work/bad-alerts.yml"
# The replicated-shard alerts on made-up series (promtool test rules). The
# test file names the rules by a relative path: copies go beside it.
alerts_test=$src/tests/system/deploy-check/zeps-alerts-test.yml
check "promtool test rules: the replicated-shard alerts fire when they should, and only then" \
    promtool test rules "$alerts_test"
mkdir -p "$work/at/a/b/c" "$work/at/deploy/prometheus"
cp "$alerts_test" "$work/at/a/b/c/"
sed 's/ and on(instance) zeps_replica_role{role="primary"} == 1$//' "$prom/zeps-alerts.yml" \
    >"$work/at/deploy/prometheus/zeps-alerts.yml"
check "  and fails when a backup's view of the in-sync set alerts too" \
    fails quiet promtool test rules "$work/at/a/b/c/zeps-alerts-test.yml"
sed 's/ and on(instance) zeps_replicas > 1$//' "$prom/zeps-alerts.yml" >"$work/at/deploy/prometheus/zeps-alerts.yml"
check "  and when a shard without replicas alerts for its coordination" \
    fails quiet promtool test rules "$work/at/a/b/c/zeps-alerts-test.yml"
for f in local.yml systemd.yml; do
    cp "$prom/$f" "$work/$f"
    cp "$prom/zeps-alerts.yml" "$work/zeps-alerts.yml"
    check "promtool check config passes on deploy/prometheus/$f" promtool check config "$work/$f"
done
check "deploy/prometheus/kubernetes.yml and podmonitor.yaml parse as YAML" /usr/bin/python3 -c \
    "import yaml,sys; [yaml.safe_load(open(f)) for f in sys.argv[1:]]" "$prom/kubernetes.yml" \
    "$prom/podmonitor.yaml"
dash=$src/deploy/grafana/zeps-dashboard.json
check "the Grafana dashboard parses as JSON and has panels with queries" /usr/bin/python3 -c \
    "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not all(p['targets'] for p in d['panels']))" "$dash"
sed 's/"panels": \[/"panels": [,/' "$dash" >"$work/bad-dash.json"
check "  (and the check fails on a broken copy)" fails /usr/bin/python3 -c \
    "import json,sys; json.load(open(sys.argv[1]))" "$work/bad-dash.json"
missing=
for m in $(grep -oh 'zeps_[a-z_]*\|process_[a-z_]*' "$dash" "$prom/zeps-alerts.yml" | sort -u); do
    base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$m")
    grep -q "\"$base\|$base\"" "$src/server/metrics.c" "$src/worker/train/wmetrics.c" ||
        missing="$missing $m"
done
check "every metric the dashboard and the rules use is exported (missing:${missing:- none})" \
    test -z "$missing"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
