#!/usr/bin/env bash
# test_convergence.sh - staleness with real processes on the quadratic model
# (d = 100, kappa = 100, 8 workers, step alpha = 1/L = 1, stable without
# staleness): plain async diverges, staleness-weighted async (inverse, and
# lr_over_tau) converges to ||x - x*|| < 1e-3. Also: the same step without
# staleness (1 worker) converges, so it is the staleness that breaks async.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-conv-XXXXXX)
trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT

conf() { # name consistency function workers
    cat >"$work/$1.conf" <<EOC
cluster = {
  servers = ["ipc://$work/$1.sock"];
  workers = $4;
  consistency = "$2";
  weighting = { function = "$3"; };
};
training = {
  model = "quadratic"; epochs = 1; iterations = 1500; dim = 100; condition = 100.0;
  optimizer = "sgd"; lr = 1.0; eval_every_steps = 50;
  delay_ms = 1.0; delay_dist = "lognormal"; delay_sigma = 0.5; seed = 1;
};
EOC
}
run() { # name
    "$BIN/zepsctl" local --config "$work/$1.conf" -q --dir "$work/$1" --timeout 300 \
        >"$work/$1.out" 2>&1
}

conf alone async none 1
run alone
rc=$?
rel=$(json_num "$work/alone/summary.json" final_rel_distance)
if [ $rc -eq 0 ] && awk -v r="${rel:-1}" 'BEGIN{exit !(r < 1e-3)}'; then
    ok "without staleness (1 worker) alpha = 1/L converges (rel $rel)"
else
    bad "without staleness alpha = 1/L should converge (rel ${rel:-none})"
fi

conf plain async none 8
run plain
rc=$?
if [ $rc -ne 0 ] && grep -q "diverged at step" "$work"/plain/worker-*.log; then
    ok "plain async with 8 workers diverges: $(grep -ho 'diverged at step [0-9]*' "$work"/plain/worker-*.log | head -1)"
else
    bad "plain async with 8 workers should diverge (zepsctl exit $rc)"
fi

for fn in inverse lr_over_tau; do
    conf "w_$fn" weighted "$fn" 8
    run "w_$fn"
    rc=$?
    rel=$(json_num "$work/w_$fn/summary.json" final_rel_distance)
    dist=$(json_num "$work/w_$fn/summary.json" final_distance)
    if [ $rc -eq 0 ] && awk -v d="${dist:-1}" 'BEGIN{exit !(d < 1e-3)}'; then
        ok "weighted $fn with 8 workers converges: ||x - x*|| = $dist (relative $rel)"
    else
        bad "weighted $fn should converge below 1e-3 (exit $rc, distance ${dist:-none})"
    fi
done

# zepsctl study end to end, small: 4 workers, s in {0, 2}, one seed.
"$BIN/zepsctl" study --steps-only --staleness 0,2 --seeds 1 --iterations 800 --workers 4 \
    --dir "$work/study" >"$work/study.out" 2>"$work/study.err"
rc=$?
row0=$(grep -E '^ +0 ' "$work/study.out")
row2=$(grep -E '^ +2 ' "$work/study.out")
if [ $rc -eq 0 ] && [ -s "$work/study/study.json" ] &&
    awk '{exit !($3 <= 0)}' <<<"$row0" && awk '{exit !($3 <= 2)}' <<<"$row2"; then
    ok "zepsctl study runs; the largest applied tau never exceeds s"
else
    bad "zepsctl study failed or applied tau above s (exit $rc): $row0 / $row2"
fi
# From the JSON, not the table's columns: at s = 2, A (plain) diverged and
# C (inverse) converged.
if /usr/bin/python3 -c '
import json, sys
cells = {c["setting"]: c for c in json.load(open(sys.argv[1]))["cells"] if c["s"] == 2}
sys.exit(not (cells["A"]["diverged"] > 0 and cells["C"]["converged"] > 0))
' "$work/study/study.json"; then
    ok "study at s = 2: plain diverges, inverse-weighted converges ($row2)"
else
    bad "study at s = 2 should show plain diverging and inverse converging: $row2"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
