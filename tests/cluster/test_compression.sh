#!/usr/bin/env bash
# test_compression.sh - error feedback with real processes, on quadratic
# (d = 500, kappa = 100, 1 server, 2 workers, bsp, sgd lr 0.1, 1500 steps;
# top-k at 1% sends 5 of 500 values per push). Checks that
#   - topk + error feedback ends within 2x of the uncompressed distance to x*,
#   - topk without error feedback ends at least 10x further away,
#   - compressed pulls (topk deltas) on top of that still converge as well,
#   - each worker's push bytes are the top-k size (4 + 8k per push), not f32,
#   - worker_momentum (momentum on the worker, sgd on the shard) follows the
#     same trajectory as the shard's momentum optimizer (under bsp the
#     average of the workers' velocities is the velocity of the average).
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-ef-XXXXXX)
trap 'rm -rf "$work"' EXIT

run() { # name push_codec error_feedback pull_codec [optimizer worker_momentum]
    cat >"$work/$1.conf" <<EOC
cluster = {
  servers = ["ipc://$work/$1.sock"];
  workers = 2;
  consistency = "bsp";
};
training = {
  model = "quadratic"; epochs = 1; iterations = 1500; dim = 500; condition = 100.0;
  optimizer = "${5:-sgd}"; lr = 0.1; momentum = 0.9; worker_momentum = ${6:-0.0}; seed = 1;
  push_codec = "$2"; codec_fraction = 0.01; error_feedback = $3; pull_codec = "$4";
};
EOC
    "$BIN/zepsctl" local --config "$work/$1.conf" -q --dir "$work/$1" --timeout 300 \
        >"$work/$1.out" 2>&1
}
rel_of() { json_num "$work/$1/summary.json" final_rel_distance; }

run none none true none || bad "uncompressed run failed: $(tail -3 "$work/none.out")"
run ef topk true none || bad "topk + EF run failed: $(tail -3 "$work/ef.out")"
run noef topk false none || bad "topk without EF run failed: $(tail -3 "$work/noef.out")"
run both topk true topk || bad "topk pushes and pulls run failed: $(tail -3 "$work/both.out")"
r_none=$(rel_of none)
r_ef=$(rel_of ef)
r_noef=$(rel_of noef)
r_both=$(rel_of both)
echo "final |x - x*|/|x*|: none $r_none, topk+EF $r_ef, topk no EF $r_noef, topk+EF pulls too $r_both"

if awk -v a="${r_ef:-1e9}" -v b="${r_none:-0}" 'BEGIN{exit !(b > 0 && a <= 2 * b)}'; then
    ok "topk 1% + error feedback ends within 2x of uncompressed ($r_ef vs $r_none)"
else
    bad "topk + EF should end within 2x of uncompressed ($r_ef vs $r_none)"
fi
if awk -v a="${r_noef:-0}" -v b="${r_ef:-1e9}" 'BEGIN{exit !(a >= 10 * b)}'; then
    ok "without error feedback topk ends at least 10x further from x* ($r_noef vs $r_ef)"
else
    bad "topk without EF should be at least 10x worse than with ($r_noef vs $r_ef)"
fi
if awk -v a="${r_both:-1e9}" -v b="${r_none:-0}" 'BEGIN{exit !(b > 0 && a <= 2 * b)}'; then
    ok "compressed pulls on top: still within 2x of uncompressed ($r_both)"
else
    bad "topk pushes and pulls should end within 2x of uncompressed ($r_both vs $r_none)"
fi
# 1500 pushes per worker of [u32 k = 5][5 x u32][5 x f32] = 44 bytes
out=$(json_num "$work/ef/worker-0.json" bytes_out)
raw=$(json_num "$work/ef/worker-0.json" bytes_out_raw)
inb=$(json_num "$work/both/worker-0.json" bytes_in)
inraw=$(json_num "$work/both/worker-0.json" bytes_in_raw)
if [ "${out:-0}" = $((1500 * 44)) ] && [ "${raw:-0}" = $((1500 * 2000)) ]; then
    ok "push bytes are exactly the top-k payloads ($out of $raw as f32)"
else
    bad "push bytes: $out (expected $((1500 * 44))), raw $raw (expected $((1500 * 2000)))"
fi
if [ -n "${inb:-}" ] && [ -n "${inraw:-}" ] && [ "$inb" -lt $((inraw / 10)) ]; then
    ok "compressed pulls: $inb bytes on the wire for $inraw as f32"
else
    bad "compressed pulls should move < 1/10 of the f32 bytes ($inb of $inraw)"
fi
run shardmom none true none momentum 0.0 || bad "server momentum run failed"
run workermom none true none sgd 0.9 || bad "worker momentum run failed"
r_sm=$(rel_of shardmom)
r_wm=$(rel_of workermom)
if awk -v a="${r_wm:-1}" -v b="${r_sm:-0}" -v c="${r_none:-0}" \
    'BEGIN{d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-3 * b && (a < 0.5 * c || a > 2 * c))}'; then
    ok "worker_momentum 0.9 + sgd tracks the shard's momentum 0.9 ($r_wm vs $r_sm; plain sgd $r_none)"
else
    bad "worker_momentum should match the shard's momentum and differ from sgd ($r_wm vs $r_sm; sgd $r_none)"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
