#!/usr/bin/env bash
# test_study_sweep.sh - `zepsctl study` over the built-in models, at CI size:
#  1. the Dai et al. reproduction, `zepsctl study --preset dai --quick` (mlp
#     at depths 1 and 3, sgd and adam, tau ~ U{0..s} injected for s in
#     {0, 8}, one worker, target test accuracy 0.7): the JSON parses and
#     holds every cell, every s = 0 run reaches the target, staleness never
#     makes a row reach it sooner and costs at least 1.5x somewhere (the
#     runs are the same bits for the same seed: pulls in turns, one BLAS
#     thread), and both figures are PNG files;
#  2. the Zhang et al. / DC-ASGD comparison, `zepsctl study --preset zhang
#     --quick` (mlp, sgd, weighting none / lr_over_tau / dc:4 under async
#     and one bsp row, s in {0, 8}): every cell present, every s = 0 run
#     reaches the target, the bsp row (served tau 0 whatever s) takes the
#     same updates at every s, the seconds to the target are in the JSON,
#     and both figures are PNG files;
#  3. the other axes: quadratic and softmax, sgd and momentum, weighting
#     none / inverse / DC-ASGD / DC-ASGD-a, s in {0, 4}: every cell present,
#     every s = 0 run reaches its target;
#  4. a sweep and a quadratic study where nothing reaches the target (an
#     unreachable one): both still draw every figure (gnuplot stopped at the
#     empty cost plot before);
#  5. the quadratic study's curves (--curves-only) drawn as curves.png.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-sweep-XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0

run() { # name, then the study's options
    local name=$1
    shift
    if "$BIN/zepsctl" study "$@" --dir "$work/$name" >"$work/$name.out" 2>"$work/$name.err"; then
        cat "$work/$name.out"
        return 0
    fi
    tail -20 "$work/$name.err"
    echo "FAIL - zepsctl study $* exited non-zero"
    fail=$((fail + 1))
    return 1
}

is_png() {
    [ "$(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
}

check() { # dir, rows, s values, extra check (python expression or "")
    /usr/bin/python3 - "$@" <<'PY'
import json, math, sys
d, rows, nstal, qual = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "dai"
zhang = sys.argv[4] == "zhang"
st = json.load(open(d + "/study.json"))
bad = []
if st["kind"] != "sweep" or len(st["rows"]) != rows:
    bad.append("expected %d rows, got %d" % (rows, len(st["rows"])))
if len(st["runs"]) != rows * nstal * st["seeds"]:
    bad.append("expected %d runs, got %d" % (rows * nstal * st["seeds"], len(st["runs"])))
for r in st["runs"]:
    if r["s"] == 0 and r["outcome"] != "reached":
        bad.append("s = 0 did not reach the target: %s %s %s seed %d (%s, best %s)"
                   % (r["model"], r["depth"], r["optimizer"], r["seed"], r["outcome"], r["best"]))
worst = 0
for row in st["rows"]:
    m = [c["median_updates"] if c["median_updates"] is not None else math.inf for c in row["cells"]]
    if len(m) != nstal:
        bad.append("%s: %d cells" % (row["label"], len(m)))
        continue
    if qual:
        if any(m[i + 1] < m[i] for i in range(len(m) - 1)):
            bad.append("%s: staleness made it faster: %s" % (row["label"], m))
        worst = max(worst, m[-1] / m[0])
    if zhang and row["label"].endswith(" bsp") and len(set(m)) != 1:
        bad.append("%s: bsp is not the same at every s: %s" % (row["label"], m))
if zhang:
    if sum(row["label"].endswith(" bsp") for row in st["rows"]) != 1:
        bad.append("expected one bsp row")
    for r in st["runs"]:
        if r["outcome"] == "reached" and not (r.get("target_s") or 0) > 0:
            bad.append("no seconds to the target: %s s %d" % (r["weighting"], r["s"]))
if qual and worst < 1.5:
    bad.append("the largest s costs at most %.2fx in every row" % worst)
for b in bad:
    print("FAIL -", b)
print("ok - %s: %d rows x %d s, %d runs" % (d, len(st["rows"]), nstal, len(st["runs"])) if not bad else "")
sys.exit(1 if bad else 0)
PY
}

if run dai --preset dai --quick; then
    if check "$work/dai" 4 2 dai; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    for png in curves cost; do
        if is_png "$work/dai/$png.png"; then
            pass=$((pass + 1))
        else
            echo "FAIL - no $png.png (gnuplot: $(tail -3 "$work/dai/gnuplot.log" 2>/dev/null))"
            fail=$((fail + 1))
        fi
    done
fi
if run zhang --preset zhang --quick; then
    if check "$work/zhang" 4 2 zhang; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    for png in curves cost; do
        if is_png "$work/zhang/$png.png"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    done
fi
if run axes --model quadratic,softmax --optimizer sgd,momentum \
    --weighting none,inverse,dc:0.04,dca:8 --staleness 0,4 --inject --quick; then
    if check "$work/axes" 16 2 ""; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    if is_png "$work/axes/cost.png"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
fi
if run none --model quadratic --inject --staleness 0,2 --seeds 1 --iterations 40 \
    --target-accuracy 1e-12; then
    for png in curves cost; do
        if is_png "$work/none/$png.png"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    done
fi
if run none-q --inject --staleness 0,1 --seeds 1 --iterations 30 --steps-only; then
    for png in cost stability; do
        if is_png "$work/none-q/$png.png"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    done
fi
if run curves --curves-only --curve-iterations 200 --workers 2; then
    if is_png "$work/curves/curves.png"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
