#!/usr/bin/env bash
# test_metrics.sh - the shard's HTTP endpoint with real processes: 2 shards
# started with --metrics-listen 127.0.0.1:0 (the port bound is read from the
# log), 2 async workers train the quadratic model. Checks /healthz, /readyz
# (and ?workers=all before and during training), that `promtool check
# metrics` passes on scrapes taken mid-training and after, that a scrape
# taken just after `zepsctl stats` agrees with it exactly (requests, errors,
# bytes, per-table counts, every tau / clock-gap / pull-wait bucket:
# metrics_compare.py), that docs/operations.md names every metric family
# exported and exactly the op label values, and the bounded answers to bad
# requests (405, 404, 414, 431, 400).
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-metrics-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/c.conf" <<EOC
cluster = {
  servers = ["ipc://$work/s0.sock", "ipc://$work/s1.sock"];
  workers = 2;
  consistency = "async";
};
training = { model = "quadratic"; iterations = 300; dim = 300; lr = 0.05; seed = 2;
             delay_ms = 1.0; delay_dist = "uniform"; delay_jitter_ms = 2.0; };
EOC
port=()
for s in 0 1; do
    "$BIN/zeps-server" --config "$work/c.conf" --shard $s --metrics-listen 127.0.0.1:0 \
        >"$work/server-$s.log" 2>&1 &
    pids+=($!)
done
for s in 0 1; do port[$s]=$(listen_port "$work/server-$s.log"); done
check "both shards print the port they listen on (${port[*]})" test -n "${port[0]}" -a -n "${port[1]}"
url0="http://127.0.0.1:${port[0]}"
code() { curl -s -o "$work/body" -w '%{http_code}' "$@"; }

check "/healthz answers 200" test "$(code "$url0/healthz")" = 200
check "/readyz answers 200 on a fresh shard" test "$(code "$url0/readyz")" = 200
check "  and says it restored nothing" grep -q "ready: shard 0 of 2, fresh" "$work/body"
check "/readyz?workers=all answers 503 before the workers joined" \
    test "$(code "$url0/readyz?workers=all")" = 503
check "  and says which worker is missing" grep -q "worker 0 has not joined" "$work/body"

for r in 0 1; do
    "$BIN/zeps-worker" --config "$work/c.conf" --rank $r >"$work/worker-$r.log" 2>&1 &
    pids+=($!)
done
wpids=("${pids[@]:2}")
# scrape while training (until both workers exit): each exposition must lint
mid_ok=0
mid_n=0
ready_all=
while kill -0 "${wpids[0]}" 2>/dev/null || kill -0 "${wpids[1]}" 2>/dev/null; do
    sleep 0.3
    [ -z "$ready_all" ] && [ "$(code "$url0/readyz?workers=all")" = 200 ] && ready_all=yes
    [ $mid_n -ge 10 ] && continue
    curl -s "$url0/metrics" >"$work/mid.txt" || continue
    mid_n=$((mid_n + 1))
    promtool check metrics <"$work/mid.txt" >"$work/promtool-mid.out" 2>&1 &&
        mid_ok=$((mid_ok + 1))
done
check "promtool check metrics passes on every scrape taken during training ($mid_ok of $mid_n)" \
    test $mid_ok -eq $mid_n -a $mid_n -ge 3
check "/readyz?workers=all answered 200 while both workers trained" test "$ready_all" = yes
ok_workers=0
for p in "${wpids[@]}"; do wait "$p" && ok_workers=$((ok_workers + 1)); done
check "both workers finished" test $ok_workers -eq 2
pids=("${pids[@]:0:2}")

for s in 0 1; do
    "$BIN/zepsctl" stats --config "$work/c.conf" --json >"$work/stats.json" 2>"$work/stats.err"
    rc=$?
    check "zepsctl stats answers (before scrape of shard $s)" test $rc -eq 0
    curl -s "http://127.0.0.1:${port[$s]}/metrics" >"$work/after-$s.txt"
    promtool check metrics <"$work/after-$s.txt" >"$work/promtool-$s.out" 2>&1
    rc=$?
    check "promtool check metrics passes on shard $s after training" test $rc -eq 0
    /usr/bin/python3 "$HERE/metrics_compare.py" "$work/stats.json" $s --text "$work/after-$s.txt" \
        >"$work/compare-$s.out"
    rc=$?
    check "shard $s: every figure STATS also has agrees ($(tail -1 "$work/compare-$s.out"))" test $rc -eq 0
    grep FAIL "$work/compare-$s.out" | head -5
done
tau_n=$(grep '^zeps_push_staleness_versions_count' "$work/after-0.txt" | awk '{s += $2} END {print s + 0}')
tau_le0=$(grep '^zeps_push_staleness_versions_bucket{table="x",le="0"}' "$work/after-0.txt" | awk '{print $2}')
check "async pushes measured staleness above 0 ($tau_le0 of $tau_n at tau 0)" \
    awk -v a="${tau_le0:-0}" -v n="${tau_n:-0}" 'BEGIN{exit !(n > 0 && a < n)}'
for m in zeps_op_duration_seconds_count process_resident_memory_bytes zeps_workers_joined \
    zeps_worker_push_staleness_versions_count zeps_snapshot_age_seconds zeps_http_connections; do
    check "the exposition has $m" grep -q "^$m" "$work/after-0.txt"
done

# one coordination state at 1, the others 0: "off" without replicas
check "zeps_coord_session: state off is 1, the five others 0" bash -c \
    "grep -q '^zeps_coord_session{state=\"off\"} 1\$' '$work/after-0.txt' &&
     [ \$(grep -c '^zeps_coord_session{state=\"[a-z]*\"} 0\$' '$work/after-0.txt') -eq 5 ]"

# the sparse tables' families (rows held, ids pulled, the cold tier) name no
# dense table: the quadratic model's one table, x, is dense
for m in zeps_table_rows zeps_table_keys_pulled_total zeps_table_tier_fetched_total; do
    check "the dense table x has no $m" bash -c "! grep -q '^$m{table=\"x\"' '$work/after-0.txt'"
done
check "  while its own families name it" grep -q '^zeps_table_pushes_total{table="x"' "$work/after-0.txt"

# errors by op and code: SNAPSHOT without a snapshot_dir is refused (ESTATE)
"$BIN/zepsctl" snapshot take --config "$work/c.conf" >"$work/snap.out" 2>&1
curl -s "$url0/metrics" >"$work/errs.txt"
check "a refused SNAPSHOT is counted as zeps_op_errors_total{op=\"snapshot\",code=\"ESTATE\"}" \
    grep -q '^zeps_op_errors_total{op="snapshot",code="ESTATE"} [1-9]' "$work/errs.txt"
check "  and the errors by op and code add up to zeps_errors_total" awk '
    /^zeps_errors_total / { t = $2 } /^zeps_op_errors_total\{/ { s += $2 }
    END { exit !(t > 0 && s == t) }' "$work/errs.txt"

# docs/operations.md, "Metrics of a shard", names every family a shard
# exports and exactly the op label values it has
doc=$(sed -n '/^### Metrics of a shard/,/^### Metrics of a worker/p' "$HERE/../../docs/operations.md")
undoc=$(awk '/^# TYPE /{print $3}' "$work/errs.txt" | while read -r f; do
    grep -q "\`$f\`" <<<"$doc" || echo "$f"; done)
check "every metric family a shard exports is in docs/operations.md (missing: ${undoc:-none})" \
    test -z "$undoc" -a "$(grep -c '^# TYPE ' "$work/errs.txt")" -gt 40
doc_ops=$(grep -o '`op` ([0-9]* values: [^)]*)' <<<"$(tr '\n' ' ' <<<"$doc")")
n_said=$(sed -E 's/^`op` \(([0-9]+) values.*/\1/' <<<"$doc_ops")
doc_ops=$(grep -o '`[a-z_]*`' <<<"${doc_ops#*values:}" | tr -d '`' | sort | tr '\n' ' ')
exp_ops=$(sed -nE 's/^zeps_op_requests_total\{op="([a-z_]+)"\}.*/\1/p' "$work/errs.txt" | sort | tr '\n' ' ')
check "the op label values docs/operations.md lists ($n_said) are those exported ($exp_ops)" \
    test -n "$exp_ops" -a "$doc_ops" = "$exp_ops" -a "$n_said" -eq "$(wc -w <<<"$exp_ops")"

# bad requests: bounded answers, then the endpoint still serves
check "POST is refused with 405" test "$(code -X POST "$url0/metrics")" = 405
check "an unknown path is 404" test "$(code "$url0/nope")" = 404
long=$(head -c 600 /dev/zero | tr '\0' a)
check "a 600-byte URL is 414" test "$(code "$url0/$long")" = 414
check "a 16 KB header is 431" test "$(code -H "X-Big: $(head -c 16000 /dev/zero | tr '\0' b)" "$url0/metrics")" = 431
printf 'GARBAGE\x01\x02 / HTTP/9.9\r\n\r\n' >"$work/garbage"
resp=$(timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/${port[0]}; cat '$work/garbage' >&3; cat <&3" 2>/dev/null | head -1)
check "a malformed request line gets 400 ($resp)" grep -q "400" <<<"$resp"
check "the endpoint still serves /metrics after them" test "$(code "$url0/metrics")" = 200
check "the bad requests are counted" \
    awk -v v="$(grep '^zeps_http_connections_total{result="bad"}' "$work/body" | awk '{print $2}')" \
    'BEGIN{exit !(v >= 4)}'

# SIGTERM with the endpoint open: a clean exit (under ASan: nothing leaked)
for s in 0 1; do
    kill -TERM "${pids[$s]}"
    wait "${pids[$s]}"
    rc=$?
    check "shard $s exits 0 on SIGTERM with its endpoint open" test $rc -eq 0
done
pids=()

# a listen address that cannot work is refused with its name
sed "s|s0.sock|s9.sock|" "$work/c.conf" >"$work/bad.conf"
"$BIN/zeps-server" --config "$work/bad.conf" --shard 0 --metrics-listen nohost >"$work/bad.log" 2>&1
check "zeps-server --metrics-listen nohost exits 2 (the operator must fix it)" test $? -eq 2
check "  naming metrics_listen" grep -q 'metrics_listen = "nohost" must be HOST:PORT' "$work/bad.log"

echo "$pass passed, $fail failed"
test "$fail" -eq 0
