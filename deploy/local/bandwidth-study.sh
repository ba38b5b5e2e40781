#!/usr/bin/env bash
# bandwidth-study.sh - time to accuracy over a slow link: does compression
# with error feedback pay when the network is the bottleneck?
#
# Two network namespaces made here (as root): a "server host" with both
# zeps-servers and a "worker host" with the 4 zeps-workers, joined by a veth
# pair whose two ends are each capped with `tc tbf` (RATE each way; this
# kernel has no netem, so no added latency). The same mlp job (Fashion-MNIST,
# bsp) runs once per variant; rank 0 evaluates every EVAL steps, and the time
# to reach TARGET test accuracy is read from its curve. Writes
#   OUT/bandwidth-study.json  per variant: bytes each way, wall time, time and
#                             step at which TARGET was reached, the curve
#   OUT/bandwidth-study.md    the table
#   OUT/bandwidth-curves.dat + bandwidth-study.png (bandwidth-study.gp)
#
# usage: sudo deploy/local/bandwidth-study.sh [OUT_DIR (docs/figures)]
#   ZEPS_BINDIR (build/bin), RATE (100mbit), TARGET (0.80), EPOCHS (2: epochs
#   of the variants with f32 pulls), EPOCHS_BOTH (6: of the variant that
#   compresses both ways, whose steps are ~50x cheaper here),
#   EVAL (20), MAX_TRAIN (training examples, 0 = all 60000),
#   STUDY_DIR (a new /tmp/zeps-bw-XXXXXX, kept)
# Needs root, iproute2 (ip, tc), python3, gnuplot (bash deploy/install-deps.sh
# study netns). Everything it creates is
# named zc<pid>-* and removed on exit, also on failure or Ctrl-C.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${ZEPS_BINDIR:-$here/../../build/bin}
BIN=$(cd "$BIN" && pwd)
OUT=${1:-$here/../../docs/figures}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RATE=${RATE:-100mbit}
TARGET=${TARGET:-0.80}
EPOCHS=${EPOCHS:-2}
EPOCHS_BOTH=${EPOCHS_BOTH:-6}
EVAL=${EVAL:-20}
MAX_TRAIN=${MAX_TRAIN:-0}
WORK=${STUDY_DIR:-$(mktemp -d /tmp/zeps-bw-XXXXXX)}
mkdir -p "$WORK"
export OPENBLAS_NUM_THREADS=1

if [ "$(id -u)" -ne 0 ]; then
    echo "bandwidth-study: needs root (network namespaces and tc); skipped" >&2
    exit 77
fi

P=zc$$-
NS_S=${P}srv
NS_W=${P}wrk
SRV_ADDR=10.213.$(($$ % 250)).1
WRK_ADDR=10.213.$(($$ % 250)).2
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 0.5
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    ip netns del "$NS_S" 2>/dev/null || true
    ip netns del "$NS_W" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

ip netns add "$NS_S"
ip netns add "$NS_W"
ip link add "${P}s" type veth peer name "${P}w"
ip link set "${P}s" netns "$NS_S"
ip link set "${P}w" netns "$NS_W"
ip -n "$NS_S" addr add "$SRV_ADDR/30" dev "${P}s"
ip -n "$NS_W" addr add "$WRK_ADDR/30" dev "${P}w"
for ns in "$NS_S" "$NS_W"; do
    ip -n "$ns" link set lo up
done
ip -n "$NS_S" link set "${P}s" up
ip -n "$NS_W" link set "${P}w" up
# the cap, each way: pulls leave the server host, pushes the worker host
ip netns exec "$NS_S" tc qdisc add dev "${P}s" root tbf rate "$RATE" burst 128kb latency 100ms
ip netns exec "$NS_W" tc qdisc add dev "${P}w" root tbf rate "$RATE" burst 128kb latency 100ms

# variant: name push_codec pull_codec epochs
VARIANTS=("none none none $EPOCHS" "push_topk topk none $EPOCHS"
          "push_pull_topk topk topk $EPOCHS_BOTH")
port=17300
for v in "${VARIANTS[@]}"; do
    read -r name push pull epochs <<<"$v"
    dir="$WORK/$name"
    mkdir -p "$dir"
    cat >"$dir/cluster.conf" <<EOC
cluster = {
  servers = ["tcp://$SRV_ADDR:$port", "tcp://$SRV_ADDR:$((port + 1))"];
  workers = 4;
  consistency = "bsp";
  request_timeout_ms = 10000;
  # a private veth between two namespaces of this machine; the study
  # measures compression, not CURVE's cost (docs/operations.md, Security)
  insecure = true;
};
training = {
  model = "mlp"; epochs = $epochs; batch_size = 64; hidden = 256;
  optimizer = "momentum"; lr = 0.025; momentum = 0.9; seed = 1;
  eval_every_steps = $EVAL; result_dir = "$dir"; max_train_examples = $MAX_TRAIN;
  push_codec = "$push"; pull_codec = "$pull"; codec_fraction = 0.01; error_feedback = true;
};
EOC
    port=$((port + 2))
    pids=()
    for k in 0 1; do
        ip netns exec "$NS_S" "$BIN/zeps-server" --config "$dir/cluster.conf" --shard $k \
            >"$dir/server-$k.log" 2>&1 &
        pids+=($!)
    done
    t0=$(date +%s.%N)
    wpids=()
    for r in 0 1 2 3; do
        ip netns exec "$NS_W" "$BIN/zeps-worker" --config "$dir/cluster.conf" --rank $r \
            >"$dir/worker-$r.log" 2>&1 &
        wpids+=($!)
        pids+=($!)
    done
    rc=0
    for p in "${wpids[@]}"; do wait "$p" || rc=$?; done
    t1=$(date +%s.%N)
    for k in 0 1; do kill -TERM "${pids[$k]}" 2>/dev/null || true; done
    for k in 0 1; do wait "${pids[$k]}" || true; done
    pids=()
    echo "{\"variant\": \"$name\", \"push_codec\": \"$push\", \"pull_codec\": \"$pull\", \"epochs\": $epochs," \
         "\"exit\": $rc, \"run_s\": $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b - a}')}" \
         >"$dir/meta.json"
    echo "$name: exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b - a}') s" >&2
done

python3 - "$WORK" "$OUT" "$RATE" "$TARGET" <<'PY'
import json, os, sys
work, out, rate, target = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
order = ["none", "push_topk", "push_pull_topk"]
label = {"none": "none (f32 both ways)", "push_topk": "topk 1% + EF pushes, f32 pulls",
         "push_pull_topk": "topk 1% + EF pushes and pulls"}
runs = []
for name in order:
    d = os.path.join(work, name)
    r = json.load(open(os.path.join(d, "meta.json")))
    ws = [json.load(open(os.path.join(d, "worker-%d.json" % k))) for k in range(4)
          if os.path.exists(os.path.join(d, "worker-%d.json" % k))]
    w0 = next((w for w in ws if w["rank"] == 0), {})
    curve, comm = w0.get("curve", []), w0.get("curve_comm", [])
    pts = [{"step": c[0], "accuracy": c[4], "loss": c[1], "t_s": comm[i][2],
            "push_bytes_rank0": comm[i][0], "pull_bytes_rank0": comm[i][1]}
           for i, c in enumerate(curve) if i < len(comm)]
    hit = next((p for p in pts if p["accuracy"] is not None and p["accuracy"] >= target), None)
    r.update({"final_accuracy": w0.get("final_accuracy"), "wall_s": w0.get("wall_s"),
              "iterations": w0.get("iterations", 0),
              "push_bytes": sum(w.get("bytes_out", 0) for w in ws),
              "push_bytes_raw": sum(w.get("bytes_out_raw", 0) for w in ws),
              "pull_bytes": sum(w.get("bytes_in", 0) for w in ws),
              "pull_bytes_raw": sum(w.get("bytes_in_raw", 0) for w in ws),
              "target": target, "time_to_target_s": hit["t_s"] if hit else None,
              "step_to_target": hit["step"] if hit else None, "curve": pts})
    runs.append(r)
json.dump({"command": "deploy/local/bandwidth-study.sh", "rate": rate, "runs": runs},
          open(os.path.join(out, "bandwidth-study.json"), "w"), indent=1)
md = ["mlp (Fashion-MNIST, bsp, 2 servers | 4 workers on another host, %s each way): "
      "time to %.2f test accuracy (rank 0, every few steps)" % (rate, target), "",
      "| variant | epochs | time to %.2f | step | final accuracy | wall s | s/step | push MB (wire / f32) | pull MB (wire / f32) |" % target,
      "|---|---|---|---|---|---|---|---|---|"]
for r in runs:
    t = "%.1f s" % r["time_to_target_s"] if r["time_to_target_s"] is not None else "not reached"
    steps = max(r["iterations"], 1)
    md.append("| %s | %d | %s | %s | %s | %.1f | %.3f | %.1f / %.1f | %.1f / %.1f |" % (
        label[r["variant"]], r["epochs"], t,
        r["step_to_target"] if r["step_to_target"] is not None else "—",
        "%.4f" % r["final_accuracy"] if r["final_accuracy"] is not None else "—", r["wall_s"] or 0,
        (r["wall_s"] or 0) / steps,
        r["push_bytes"] / 1e6, r["push_bytes_raw"] / 1e6, r["pull_bytes"] / 1e6, r["pull_bytes_raw"] / 1e6))
open(os.path.join(out, "bandwidth-study.md"), "w").write("\n".join(md) + "\n")
with open(os.path.join(out, "bandwidth-curves.dat"), "w") as f:
    f.write("# rank 0's curve per variant (index 0 none, 1 push_topk, 2 push_pull_topk): t_s step accuracy loss\n")
    for r in runs:
        for p in r["curve"]:
            f.write("%r %d %r %r\n" % (p["t_s"], p["step"], p["accuracy"], p["loss"]))
        f.write("\n\n")
PY
[ -f "$OUT/bandwidth-study.gp" ] || cp "$here/../../docs/figures/bandwidth-study.gp" "$OUT/"
(cd "$OUT" && gnuplot -e "target=$TARGET; rate='$RATE'" bandwidth-study.gp)
cat "$OUT/bandwidth-study.md"
