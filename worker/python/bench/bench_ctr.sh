#!/usr/bin/env bash
# bench_ctr.sh - the Python CTR job beside its references, in one run, on one
# data set (docs/python.md, "Per-step budget"):
#   1. plain PyTorch, one process (ctr_torch_ref.py): the reference;
#   2. zeps from Python: ctr_dlrm.py --profile as every worker of
#      deploy/local/ctr.conf (2 servers x 4 workers, async);
#   3. zeps from C: the ctr model of zeps-worker on the same cluster file
#      (not for dlrm: zeps-worker has no such model).
# Prints each one's examples/s (training, summed over workers) and test AUC,
# the ratios Python/plain and Python/C, and rank 0's per-step budget. The
# reference runs twice, before and after the zeps jobs, and the ratio is
# against the mean of its two rates: on a shared machine whose load drifts
# during a run, a reference measured on one side only is biased by the
# drift (both rates are printed).
#   bash worker/python/bench/bench_ctr.sh [TRAIN_LINES]    (default 1000000)
#   env: ZEPS_BUILD_DIR (default build/), ZEPS_CTR_DATA (the data set's
#   folder; default the cache folder deploy/local/run-ctr.sh uses),
#   ZEPS_BENCH_MODEL (ctr, the default, or dlrm: ctr_dlrm.py --model),
#   ZEPS_BENCH_ARGS (more options for ctr_dlrm.py, e.g. --no-prefetch),
#   ZEPS_BENCH_CONSISTENCY (the cluster's mode: async for ctr, bsp for dlrm by
#   default; under bsp and ssp lost_worker_timeout_s = 0: the shards would declare a
#   worker lost while rank 0 evaluates, a minute on a loaded machine),
#   ZEPS_BENCH_STALENESS (ssp's bound, cluster.staleness; default 0)
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${ZEPS_BUILD_DIR:-$src/build}
bin=$build/bin
train=${1:-1000000}
data=${ZEPS_CTR_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/zeps/criteo-gen-$train-100000-seed1}
[ -s "$data/truth.json" ] || "$bin/zepsctl" gen-criteo --out "$data" --train "$train" \
    --test 100000 --seed 1 >/dev/null
run=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-bench-ctr-XXXXXX)
trap 'rm -rf "$run"' EXIT
export OPENBLAS_NUM_THREADS=1 PYTHONPATH=$build/python
model=${ZEPS_BENCH_MODEL:-ctr}
mode=${ZEPS_BENCH_CONSISTENCY:-$([ "$model" = dlrm ] && echo bsp || echo async)}
lost=""
[ "$mode" = bsp ] || [ "$mode" = ssp ] && lost="\n    lost_worker_timeout_s = 0;"
[ -n "${ZEPS_BENCH_STALENESS:-}" ] && lost="$lost\n    staleness = $ZEPS_BENCH_STALENESS;"
port=$((20000 + RANDOM % 20000))
sed -e "s|@DATA@|$data|g" -e "s|:17200\"|:$port\"|" -e "s|:17201\"|:$((port + 1))\"|" \
    -e "s|consistency = \"async\";|consistency = \"$mode\";$lost|" \
    "$src/deploy/local/ctr.conf" >"$run/ctr.conf"
num() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

/usr/bin/python3 "$src/worker/python/bench/ctr_torch_ref.py" --data "$data" --model "$model" \
    --json "$run/ref.json"
"$bin/zepsctl" local --config "$run/ctr.conf" --dir "$run/py" -q --exec \
    "/usr/bin/python3 $src/worker/python/examples/ctr_dlrm.py --data $data --model $model --profile ${ZEPS_BENCH_ARGS:-}" \
    >"$run/py.out"
c=0 ac=0
if [ "$model" = ctr ]; then
    "$bin/zepsctl" local --config "$run/ctr.conf" --dir "$run/c" -q >"$run/c.out"
    c=$(num "$run/c/summary.json" examples_per_s) ac=$(num "$run/c/summary.json" final_auc)
fi
/usr/bin/python3 "$src/worker/python/bench/ctr_torch_ref.py" --data "$data" --model "$model" \
    --json "$run/ref2.json"
ref1=$(num "$run/ref.json" examples_per_s) ref2=$(num "$run/ref2.json" examples_per_s)
ref=$(/usr/bin/python3 -c "print(($ref1 + $ref2) / 2)")
py=$(num "$run/py/summary.json" examples_per_s)
/usr/bin/python3 - "$ref" "$py" "$c" "$(num "$run/ref.json" final_auc)" \
    "$(num "$run/py/summary.json" final_auc)" "$ac" "$run/py/worker-0.json" "$model" "$mode" \
    "$(printf %.0f "$ref1")" "$(printf %.0f "$ref2")" <<'PY'
import json, sys
ref, py, c, aref, apy, ac = map(float, sys.argv[1:7])
vs_c = f", {py / c:.2f}x the C job" if c else ""
print(f"model {sys.argv[8]}, {sys.argv[9]}")
print(f"plain PyTorch, 1 process: {ref:9.0f} examples/s, AUC {aref:.4f}  "
      f"(mean of {sys.argv[10]} before and {sys.argv[11]} after)")
print(f"zeps from Python, 2 x 4:  {py:9.0f} examples/s, AUC {apy:.4f}  "
      f"({py / ref:.2f}x plain PyTorch{vs_c})")
if c:
    print(f"zeps from C, 2 x 4:       {c:9.0f} examples/s, AUC {ac:.4f}")
b = json.load(open(sys.argv[7]))["step_us"]
print("rank 0's step (us): " + ", ".join(f"{k} {v:.0f}" for k, v in b.items()))
PY
