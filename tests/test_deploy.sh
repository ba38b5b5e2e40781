#!/usr/bin/env bash
# test_deploy.sh - static checks of deploy/, each shown to fail on a broken
# copy of what it checks:
#   systemd     `systemd-analyze verify` of both units, with ExecStart=
#               pointed at the build's binaries (verify resolves ExecStart
#               on this machine, and the units name /usr/local/bin, where
#               nothing is installed while testing); any message fails,
#               since verify reports an unknown key but still exits 0.
#               `systemd-analyze security --offline` must rate them OK.
#   cluster     the example cluster files parse as zeps reads them.
#   container   tests/deploy-check/check-dockerfile.js (no container engine
#               runs here: a static check, see that file for what it covers).
#   kubernetes  tests/deploy-check/validate-k8s.js: kubernetes-models schemas
#               plus a check for unknown fields (npm ci into the build dir).
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
BUILD=${ZEPS_BUILD_DIR:-$(dirname "$BIN")}
work=$(mktemp -d /tmp/zeps-deploy-XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { # description, command...
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
fails() { ! "$@"; }

# ---------------------------------------------------------------- systemd
if ! command -v systemd-analyze >/dev/null; then
    bash "$src/deploy/install-deps.sh"
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

# ---------------------------------------------------------------- container
checker=$src/tests/deploy-check
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

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
