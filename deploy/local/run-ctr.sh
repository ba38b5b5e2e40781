#!/usr/bin/env bash
# The ctr workload end to end: install what is missing, build, generate the
# Criteo-format data set once into a cache directory, train logistic
# regression + a factorization machine on it with 2 servers and 4 workers in
# async mode (deploy/local/ctr.conf), and print the test AUC next to the
# hidden model's and the dense-only baseline's (truth.json).
#
# Environment (all optional):
#   ZEPS_CTR_TRAIN, ZEPS_CTR_TEST, ZEPS_CTR_SEED  data set size and seed
#                  (default 1000000, 100000, 1)
#   ZEPS_CTR_DATA  the data set's directory (default: a cache directory named
#                  after size and seed under ${XDG_CACHE_HOME:-~/.cache}/zeps)
#   ZEPS_CTR_PORT  first of the two server ports (default 17200)
#   ZEPS_BUILD_DIR build directory (default build/ in the source tree)
# Arguments go to `zepsctl local` (e.g. --timeout 600, -q; --replicas 2: each
# shard two replicas and a ZooKeeper, docs/performance.md "Replication").
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bash "$src/deploy/install-deps.sh" core
bash "$src/deploy/build.sh" >/dev/null
bin=${ZEPS_BUILD_DIR:-$src/build}/bin

train=${ZEPS_CTR_TRAIN:-1000000}
test=${ZEPS_CTR_TEST:-100000}
seed=${ZEPS_CTR_SEED:-1}
port=${ZEPS_CTR_PORT:-17200}
data=${ZEPS_CTR_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/zeps/criteo-gen-$train-$test-seed$seed}
if [ ! -s "$data/truth.json" ]; then
    echo "run-ctr: generating the data set into $data"
    mkdir -p "$data"
    "$bin/zepsctl" gen-criteo --out "$data" --train "$train" --test "$test" --seed "$seed"
else
    echo "run-ctr: using the data set in $data"
fi

run=$(mktemp -d "${TMPDIR:-/tmp}/zeps-ctr-XXXXXX")
sed -e "s|@DATA@|$data|g" -e "s|:17200\"|:$port\"|" -e "s|:17201\"|:$((port + 1))\"|" \
    "$src/deploy/local/ctr.conf" >"$run/ctr.conf"
rc=0
"$bin/zepsctl" local --config "$run/ctr.conf" --dir "$run" "$@" || rc=$?

# A number after "key": in a flat JSON file; empty if absent or null.
num() {
    grep -o "\"$2\": *[-0-9.eE+]*" "$1" 2>/dev/null | head -1 | sed 's/.*: *//' |
        awk '{ printf($0 ~ /[.eE]/ ? "%.4f" : "%s", $0) }'
}
auc=$(num "$run/worker-0.json" final_auc)
loss=$(num "$run/worker-0.json" final_loss)
truth_auc=$(num "$data/truth.json" truth_test_auc)
truth_loss=$(num "$data/truth.json" truth_test_logloss)
dense_auc=$(num "$data/truth.json" dense_only_test_auc)
dense_loss=$(num "$data/truth.json" dense_only_test_logloss)
echo
echo "ctr on $(num "$data/truth.json" train_examples) examples," \
    "$(num "$data/truth.json" distinct_ids_total) distinct ids (run directory $run):"
printf '  %-34s AUC %-8s logloss %s\n' "trained (2 servers x 4 workers)" "${auc:-n/a}" "${loss:-n/a}"
printf '  %-34s AUC %-8s logloss %s\n' "hidden model (truth.json)" "$truth_auc" "$truth_loss"
printf '  %-34s AUC %-8s logloss %s\n' "dense fields only (truth.json)" "$dense_auc" "$dense_loss"
if [ -n "$auc" ]; then
    awk -v a="$auc" -v t="$truth_auc" -v d="$dense_auc" 'BEGIN {
        printf "  AUC gap to the hidden model %.4f (target <= 0.01), over dense-only %+.4f\n",
               t - a, a - d }'
fi
exit "$rc"
