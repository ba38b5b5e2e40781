#!/usr/bin/env bash
# compression-study.sh - does error feedback keep convergence under gradient
# compression? The grid: {quadratic, mlp} x {bsp, async} x {none, topk 1%
# with and without error feedback, sign with and without}, each a real
# cluster (2 servers, 4 workers) run once with `zepsctl local`. Writes
#   OUT/compression-study.json   every run: config, final loss/accuracy,
#                                push bytes (wire and f32), wall time, curve
#   OUT/compression-study.md     the table docs/compression.md shows
#   OUT/compression-curves.dat   rank 0's curves: push MB vs loss/accuracy
#   OUT/compression-study.png    the figure (gnuplot, compression-study.gp)
#
# usage: deploy/local/compression-study.sh [OUT_DIR (docs/figures)]
#   ZEPS_BINDIR   the built binaries (default: build/bin)
#   STUDY_DIR     where runs go (default: a new /tmp/zeps-cstudy-XXXXXX, kept)
#   STUDY_MODELS  "quadratic mlp" (default); STUDY_EPOCHS mlp epochs (5)
#   STUDY_QUAD_ITERS quadratic iterations (3000)
#   STUDY_CONS "bsp async" (default); STUDY_VARIANTS a subset of
#   "none topk_ef topk_noef sign_ef sign_noef" (default all)
#   STUDY_NAME base name of the outputs (compression-study; the curves file
#   is then STUDY_NAME-curves.dat, and no figure is drawn unless it is the
#   default)
# Needs: zepsctl, python3, gnuplot (bash deploy/install-deps.sh study).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${ZEPS_BINDIR:-$here/../../build/bin}
OUT=${1:-$here/../../docs/figures}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=${STUDY_DIR:-$(mktemp -d /tmp/zeps-cstudy-XXXXXX)}
mkdir -p "$WORK"
MODELS=${STUDY_MODELS:-quadratic mlp}
EPOCHS=${STUDY_EPOCHS:-5}
QITERS=${STUDY_QUAD_ITERS:-3000}
CONS=${STUDY_CONS:-bsp async}
ONLY=${STUDY_VARIANTS:-none topk_ef topk_noef sign_ef sign_noef}
NAME=${STUDY_NAME:-compression-study}
# mlp's momentum 0.9: on the shards (optimizer momentum, the default) or on
# the workers before compression (STUDY_MLP_MOMENTUM=worker: worker_momentum
# 0.9, optimizer sgd; the same trajectory without compression)
MLP_MOMENTUM=${STUDY_MLP_MOMENTUM:-shard}
export OPENBLAS_NUM_THREADS=1

# variant: name codec error_feedback
VARIANTS=("none none true" "topk_ef topk true" "topk_noef topk false"
          "sign_ef sign true" "sign_noef sign false")

training_of() { # model codec ef
    case $1 in
    quadratic)
        # lr 0.1 = 0.1/L: top-k with error feedback delays each coordinate
        # by up to 1/fraction steps, and at 0.25/L and above it diverged
        echo "model = \"quadratic\"; epochs = 1; iterations = $QITERS; dim = 1000;
  condition = 100.0; optimizer = \"sgd\"; lr = 0.1; eval_every_steps = 100;" ;;
    mlp)
        if [ "$MLP_MOMENTUM" = worker ]; then
            echo "model = \"mlp\"; epochs = $EPOCHS; batch_size = 64; hidden = 256;
  optimizer = \"sgd\"; lr = 0.025; worker_momentum = 0.9; eval_every_steps = 50;"
        else
            echo "model = \"mlp\"; epochs = $EPOCHS; batch_size = 64; hidden = 256;
  optimizer = \"momentum\"; lr = 0.025; momentum = 0.9; eval_every_steps = 50;"
        fi ;;
    esac
}

start=$(date +%s)
for model in $MODELS; do
    for cons in $CONS; do
        for v in "${VARIANTS[@]}"; do
            read -r name codec ef <<<"$v"
            [[ " $ONLY " == *" $name "* ]] || continue
            run="$model-$cons-$name"
            mkdir -p "$WORK/$run"
            cat >"$WORK/$run.conf" <<EOC
cluster = {
  servers = ["ipc://$WORK/$run/s0.sock", "ipc://$WORK/$run/s1.sock"];
  workers = 4;
  consistency = "$cons";
};
training = {
  $(training_of "$model")
  seed = 1; push_codec = "$codec"; codec_fraction = 0.01; error_feedback = $ef;
};
EOC
            t0=$(date +%s.%N)
            rc=0
            "$BIN/zepsctl" local --config "$WORK/$run.conf" -q --dir "$WORK/$run" \
                --timeout 900 >"$WORK/$run.out" 2>&1 || rc=$?
            t1=$(date +%s.%N)
            echo "{\"run\": \"$run\", \"model\": \"$model\", \"consistency\": \"$cons\"," \
                 "\"variant\": \"$name\", \"codec\": \"$codec\", \"error_feedback\": $ef," \
                 "\"exit\": $rc, \"run_s\": $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b - a}')}" >"$WORK/$run/meta.json"
            echo "$run: exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b - a}') s" >&2
        done
    done
done
echo "grid done in $(( $(date +%s) - start )) s" >&2

python3 - "$WORK" "$OUT" "$QITERS" "$EPOCHS" "$NAME" <<'PY'
import json, math, os, sys
work, out, qiters, epochs, name = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
runs = []
for d in sorted(os.listdir(work)):
    meta = os.path.join(work, d, "meta.json")
    if not os.path.exists(meta):
        continue
    r = json.load(open(meta))
    ws = []
    for k in range(4):
        p = os.path.join(work, d, "worker-%d.json" % k)
        ws.append(json.load(open(p)) if os.path.exists(p) else None)
    w0 = ws[0] or {}
    r["final_loss"] = w0.get("final_loss")
    r["final_accuracy"] = w0.get("final_accuracy")
    r["final_rel_distance"] = w0.get("final_rel_distance")
    r["diverged"] = any(w and w.get("diverged") for w in ws)
    r["wall_s"] = max((w or {}).get("wall_s") or 0 for w in ws)
    r["push_bytes_wire"] = sum((w or {}).get("bytes_out", 0) for w in ws)
    r["push_bytes_raw"] = sum((w or {}).get("bytes_out_raw", 0) for w in ws)
    r["encode_s"] = sum((w or {}).get("encode_s") or 0 for w in ws)
    comm = w0.get("curve_comm", [])
    r["curve"] = [{"step": c[0], "loss": c[1], "rel_distance": c[2], "accuracy": c[4],
                   "push_bytes_rank0": comm[i][0] if i < len(comm) else None,
                   "t_s": comm[i][2] if i < len(comm) else None}
                  for i, c in enumerate(w0.get("curve", []))]
    runs.append(r)
json.dump({"command": "deploy/local/compression-study.sh", "runs": runs},
          open(os.path.join(out, name + ".json"), "w"), indent=1)

order = ["none", "topk_ef", "topk_noef", "sign_ef", "sign_noef"]
label = {"none": "none (f32)", "topk_ef": "topk 1% + EF", "topk_noef": "topk 1%, no EF",
         "sign_ef": "sign + EF", "sign_noef": "sign, no EF"}
def fmt(x, spec):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)
md = []
for model in ["quadratic", "mlp"]:
    rs = {(r["consistency"], r["variant"]): r for r in runs if r["model"] == model}
    if not rs:
        continue
    if model == "quadratic":
        md.append("quadratic (d = 1000, κ = 100, 2 servers × 4 workers, sgd lr 0.1, %s steps): "
                  "final ‖x − x*‖/‖x*‖ and loss" % qiters)
        md.append("")
        md.append("| push codec | bsp rel. distance | bsp loss | async rel. distance | async loss | push bytes / f32 |")
    else:
        md.append("mlp (Fashion-MNIST, 2 servers × 4 workers, momentum lr 0.025, %s epochs): "
                  "final test accuracy and loss" % epochs)
        md.append("")
        md.append("| push codec | bsp accuracy | bsp loss | async accuracy | async loss | push bytes / f32 |")
    md.append("|---|---|---|---|---|---|")
    for v in order:
        cells = []
        ratio = None
        for cons in ["bsp", "async"]:
            r = rs.get((cons, v))
            if r is None:
                cells += ["—", "—"]
                continue
            bad = " (diverged)" if r["diverged"] else (" (exit %d)" % r["exit"] if r["exit"] else "")
            if model == "quadratic":
                cells += [fmt(r["final_rel_distance"], ".3g") + bad, fmt(r["final_loss"], ".3g")]
            else:
                cells += [fmt(r["final_accuracy"], ".4f") + bad, fmt(r["final_loss"], ".4f")]
            if r["push_bytes_raw"]:
                ratio = r["push_bytes_wire"] / r["push_bytes_raw"]
        md.append("| %s | %s | %s |" % (label[v], " | ".join(cells), fmt(ratio, ".4f")))
    md.append("")
open(os.path.join(out, name + ".md"), "w").write("\n".join(md) + "\n")

# gnuplot data: one index per (model, consistency, variant) in a fixed order
curves = "compression-curves.dat" if name == "compression-study" else name + "-curves.dat"
with open(os.path.join(out, curves), "w") as f:
    f.write("# rank 0's curve per run: push_MB (rank 0, wire)  step  loss  rel_distance  accuracy  t_s\n")
    for model in ["quadratic", "mlp"]:
        for cons in ["bsp", "async"]:
            for v in order:
                r = next((r for r in runs if (r["model"], r["consistency"], r["variant"]) == (model, cons, v)), None)
                f.write("# index: %s %s %s\n" % (model, cons, v))
                for c in (r["curve"] if r else []):
                    vals = [(c["push_bytes_rank0"] or 0) / 1e6, c["step"], c["loss"], c["rel_distance"], c["accuracy"], c["t_s"]]
                    f.write(" ".join("nan" if x is None else repr(x) for x in vals) + "\n")
                if not r or not r["curve"]:
                    f.write("nan nan nan nan nan nan\n")
                f.write("\n\n")
PY
if [ "$NAME" = compression-study ]; then
    [ -f "$OUT/compression-study.gp" ] || cp "$here/../../docs/figures/compression-study.gp" "$OUT/"
    (cd "$OUT" && gnuplot compression-study.gp)
fi
echo "wrote $OUT/$NAME.{json,md} and the curves (runs in $WORK)" >&2
