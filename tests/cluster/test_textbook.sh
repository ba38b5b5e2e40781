#!/usr/bin/env bash
# test_textbook.sh - the textbook exercise with exact staleness, at reduced
# size: `zepsctl study --inject --quick` (quadratic d = 100, kappa = 100, 8
# workers, tau ~ U{0..s} for s in {0, 2, 5} under settings A-D, then the
# largest stable lr with fixed tau = s by bisection), every run held against
# the reference simulation of the same iteration (tests/support/zt_delay_sim.c,
# tests/cluster/textbook_compare.py): same outcome, updates to the threshold
# within 10%, divergence exactly where the simulation diverges; and the
# bisection's bracket around 2 sin(pi/(4s+2)), the delayed-gradient bound.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d /tmp/zeps-textbook-XXXXXX)
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
