#!/usr/bin/env bash
# test_textbook.sh - the textbook exercise with exact staleness, at reduced
# size: `zepsctl study --inject --quick` (quadratic d = 100, kappa = 100, 8
# workers, tau ~ U{0..s} for s in {0, 2, 5} under settings A-D, then the
# largest stable lr with fixed tau = s by bisection), every run held against
# the reference simulation of the same iteration (tests/support/zt_delay_sim.c,
# tests/cluster/textbook_compare.py): same outcome, updates to the threshold
# within 10%, divergence exactly where the simulation diverges; the early
# stop at the threshold (FINISH) counting the same updates as a run to the
# end of its budget; and the bisection's bracket around 2 sin(pi/(4s+2)),
# the delayed-gradient bound.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-textbook-XXXXXX)
trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT

if ! "$BIN/zepsctl" study --inject --quick --dir "$work/study" >"$work/study.out" 2>"$work/study.err"; then
    tail -20 "$work/study.err"
    echo "0 passed, 1 failed"
    exit 1
fi
cat "$work/study.out"
# The figures, made by the command itself (gnuplot): two PNG files.
for png in cost stability; do
    if [ "$(head -c 8 "$work/study/$png.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
        echo "FAIL - zepsctl study made no $png.png (gnuplot: $(tail -3 "$work/study/gnuplot.log" 2>/dev/null))"
        echo "0 passed, 1 failed"
        exit 1
    fi
done
/usr/bin/python3 "$here/textbook_compare.py" "$work/study/study.json" "$BIN/zt_delay_sim"
rc=$?

# The early stop counts the same updates. The study's s = 5, B run ended at
# the threshold (rank 0 said FINISH, the others' pulls were answered
# EFINISHED): run its cluster file again without training.target_rel_distance,
# to the end of its budget, and hold the two against each other and against
# the simulation run out too: the same first version under the threshold
# (to the update), and the early run must have stopped well before the
# budget with every other worker told so.
run=$work/study/steps-s5-B-seed1
sed -e '/target_rel_distance/d' -e "s|127.0.0.1:[0-9]*|127.0.0.1:$(free_port)|" \
    -e "s|trace_dir = .*|trace_dir = \"$work/full\";|" "$run/study.conf" >"$work/full.conf"
mkdir -p "$work/full"
"$BIN/zepsctl" local --config "$work/full.conf" -q --dir "$work/full" --timeout 300 \
    >"$work/full.log" 2>&1 || echo "zepsctl local exited $? (see below)"
/usr/bin/python3 - "$run" "$work/full" "$work/study/study.json" "$BIN/zt_delay_sim" <<'PY' || rc=1
import json, re, subprocess, sys
early, full, study, sim = sys.argv[1:5]
st = json.load(open(study))
spec = [r for r in st["runs"] if r["dir"] == "steps-s5-B-seed1"][0]

def first_under(d):
    text = open(d + "/worker-0.json").read()
    pts = json.loads(re.search(r'"curve":(\[.*?\]\])', text).group(1))
    return next((p[5] for p in pts if p[2] is not None and p[2] < st["threshold"]), None)

def result(d, w):
    return json.load(open("%s/worker-%d.json" % (d, w)))

out = subprocess.run([sim, "uniform", "5", repr(spec["lr"]), "none", "1", str(st["workers"]),
                      str(spec["iterations"]), str(st["dim"]), repr(st["condition"]),
                      repr(st["threshold"])], check=True, capture_output=True,
                     text=True).stdout.split()
budget = st["workers"] * spec["iterations"]
checks = [
    ("early stop: first version under the threshold %s, run out %s, simulation run out %s"
     % (first_under(early), first_under(full), out[1]),
     first_under(early) is not None and first_under(early) == first_under(full)
     and first_under(full) == float(out[1])),
    ("early stop: %d updates applied of a budget of %d" % (spec["applied"], budget),
     spec["applied"] < 0.6 * budget),
    ("early stop: rank 0 reached the target, ranks 1-%d were told (finished)"
     % (st["workers"] - 1), result(early, 0)["reached_target"]
     and all(result(early, w)["finished"] for w in range(1, st["workers"]))),
    ("run out: every worker ran its %d steps" % spec["iterations"],
     all(result(full, w)["iterations"] == spec["iterations"] for w in range(st["workers"]))),
]
for what, ok in checks:
    print("%-4s %s" % ("ok" if ok else "FAIL", what))
bad = sum(not ok for _, ok in checks)
print("%d passed, %d failed" % (len(checks) - bad, bad))
sys.exit(1 if bad else 0)
PY
# The stability bracket against the analytic bound: the stable end at most
# 3% above it and the unstable end at most 3% below (a bisection of
# [0, 2.2] in 7 steps resolves 1.7%).
/usr/bin/python3 - "$work/study/study.json" <<'PY' || rc=1
import json, sys
st = json.load(open(sys.argv[1]))
bad = 0
for row in st["stability"]:
    a, lo, hi = row["analytic_stable_lr"], row["largest_stable_lr"], row["smallest_unstable_lr"]
    ok = lo <= 1.03 * a and hi >= 0.97 * a and lo < hi
    bad += not ok
    print("%-4s fixed tau %d: stable %.4g, unstable %.4g, 2 sin(pi/(4s+2)) = %.4g"
          % ("ok" if ok else "FAIL", row["s"], lo, hi, a))
print("%d passed, %d failed" % (len(st["stability"]) - bad, bad))
sys.exit(1 if bad else 0)
PY
exit $rc
