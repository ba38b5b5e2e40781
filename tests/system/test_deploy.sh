#!/usr/bin/env bash
# test_deploy.sh - static checks of deploy/, each shown to fail on a broken
# copy of what it checks:
#   systemd     `systemd-analyze verify` of both units, with ExecStart=
#               pointed at the build's binaries (verify resolves ExecStart
#               on this machine, and the units name /usr/local/bin, where
#               nothing is installed while testing); any message fails,
#               since verify reports an unknown key but still exits 0.
#               `systemd-analyze security --offline` must rate them OK.
#               A short real run under strace: every system call of the
#               server and the worker is in the units' SystemCallFilter=,
#               and none maps memory writable and executable.
#   cluster     the example cluster files parse as zeps reads them.
#   readiness   a worker with no shard up retries HELLO (logged) for
#               hello_timeout_ms and fails naming the shard; one started
#               before its shard (at a DNS name) waits and trains.
#   container   tests/system/deploy-check/check-dockerfile.js (no container engine
#               runs here: a static check, see that file for what it covers).
#   kubernetes  tests/system/deploy-check/validate-k8s.js: kubernetes-models schemas
#               plus a check for unknown fields (npm ci into the build dir).
#               The shards' readiness probe is GET /readyz on the port their
#               cluster file's metrics_listen names.
#   prometheus  deploy/prometheus: `promtool check rules` on the alert rules
#               and `promtool check config` on the scrape configs (the
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
trap 'kill -KILL ${wpid:-} ${spid:-} ${srv:-} ${st:-} 2>/dev/null; rm -rf "$work"' EXIT
fails() { ! "$@"; }

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
check "systemd-analyze verify: zeps-server@0 and zeps-worker@3, no message" \
    verify "$units" zeps-server@0.service zeps-worker@3.service
for u in zeps-server@0.service zeps-worker@1.service; do
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

# ---------------------------------------------------------------- prometheus
prom=$src/deploy/prometheus
check "promtool check rules passes on deploy/prometheus/zeps-alerts.yml" \
    promtool check rules "$prom/zeps-alerts.yml"
sed 's/expr: increase(zeps_lost_workers_total\[5m\]) > 0/expr: increase(zeps_lost_workers_total[5m] > 0/' \
    "$prom/zeps-alerts.yml" >"$work/bad-alerts.yml"
check "  and fails on a broken expression" fails promtool check rules "$work/bad-alerts.yml"
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
