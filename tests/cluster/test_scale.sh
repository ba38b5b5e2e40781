#!/usr/bin/env bash
# test_scale.sh - `zepsctl scale --quick`: the strong-scaling study at
# reduced size (MLP, BSP, 1 shard, N in {1, 2}), checked from its files:
# every cell ran and trained, S(N) and E(N) are what the times say
# (S(N) = T(1)/T(N), E = S/N), the workers' request and byte counts are
# there, the alpha-beta line is the least-squares fit of the round trips the
# bench wrote, and the figure is a PNG. Then bad options exit 2.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-scale-test-XXXXXX)
trap 'pkill -KILL -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
bad() { echo "FAIL - $1"; fail=$((fail + 1)); }

if "$BIN/zepsctl" scale --quick --dir "$work/s" >"$work/out" 2>"$work/err"; then
    ok "zepsctl scale --quick ran"
    cat "$work/out"
else
    bad "zepsctl scale --quick failed: $(tail -5 "$work/err")"
fi

if /usr/bin/python3 - "$work/s" <<'PY'; then ok "scale.json: cells, S(N), E(N), counts, fit"; else bad "scale.json checks"; fi
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/scale.json"))
cells = s["cells"]
assert [(c["servers"], c["workers"]) for c in cells] == [(1, 1), (1, 2)], cells
t1 = cells[0]["wall_s"]
for c in cells:
    assert c["wall_s"] > 0 and c["examples_per_s"] > 0, c
    assert abs(c["speedup"] - t1 / c["wall_s"]) < 1e-3 * c["speedup"], c
    assert abs(c["efficiency"] - c["speedup"] / c["workers"]) < 1e-3, c
    # each worker pulls and pushes every step: at least 2 requests a step
    assert c["requests"] >= 2 * (4096 // 64), c
    assert c["bytes"] > 0 and 0 < c["waiting_share"] < 1, c
    assert c["accuracy"] > 0.3, c  # 4096 examples of Fashion-MNIST: above chance (0.1)
    # 4096 examples over the workers in batches of 64: 64 steps in all
    assert c["steps"] == 4096 // 64, c
    assert "transfer_share" in c, c
# the fit is the least-squares line of the bench's p50 round trips
b = json.load(open(d + "/bench.json"))
pts = []
for r in b["results"]:
    for k in ("push_rtt_p50_us", "pull_rtt_p50_us"):
        pts.append((r["bytes"], r["zeps"][k] * 1e-6))
n = len(pts)
sm = sum(m for m, _ in pts); st = sum(t for _, t in pts)
smm = sum(m * m for m, _ in pts); smt = sum(m * t for m, t in pts)
beta = (n * smt - sm * st) / (n * smm - sm * sm)
alpha = (st - beta * sm) / n
f = s["fit"]
assert abs(f["beta_s_per_byte"] - beta) <= 1e-6 * abs(beta) + 1e-15, (f, beta)
assert abs(f["alpha_s"] - alpha) <= 1e-6 * abs(alpha) + 1e-9, (f, alpha)
assert beta > 0, beta  # bigger messages take longer
for c in cells:  # two round trips a step plus every byte once, over worker time
    busy = c["compute_s"] + c["comm_s"]
    want = (2 * c["steps"] * f["alpha_s"] + c["bytes"] * f["beta_s_per_byte"]) / busy
    assert abs(c["transfer_share"] - want) <= 1e-3 * want + 1e-4, (c, want)
PY

if [ "$(head -c 8 "$work/s/scale.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then
    ok "scale.png is a PNG"
else
    bad "no scale.png (gnuplot: $(tail -3 "$work/s/gnuplot.log" 2>/dev/null))"
fi
if grep -q '^| 1 | 2 | 3/' "$work/s/scale.md"; then ok "scale.md has the S=1 N=2 row"; else bad "scale.md: $(cat "$work/s/scale.md")"; fi

for args in "--workers 0" "--workers 1,x" "--reps 99" "--sizes 0" "--bogus"; do
    # shellcheck disable=SC2086
    "$BIN/zepsctl" scale $args --dir "$work/bad" >/dev/null 2>"$work/bad.err"
    rc=$?
    if [ $rc = 2 ] && [ -s "$work/bad.err" ]; then ok "scale $args: exit 2, said"; else bad "scale $args: exit $rc"; fi
done

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
