#!/usr/bin/env bash
# test_prometheus.sh - Debian's prometheus server scraping a real cluster:
# 2 shards and 2 async workers, each serving /metrics on a free loopback
# port; prometheus (its own temporary data dir, 127.0.0.1:<free port>,
# scrape_interval 1s, the rule file deploy/prometheus/zeps-alerts.yml)
# scrapes them while they train. Then, with the cluster idle, `zepsctl stats
# --json` is taken, and once prometheus has scraped again its HTTP API must
# give exactly the STATS figures (requests, errors, bytes, per-table counts,
# every tau / clock-gap / pull-wait bucket: metrics_compare.py --prom). The
# workers' own endpoints must have been scraped (steps, bytes). Last,
# `zepsctl local --metrics` prints an endpoint per process and writes a
# file_sd target list that `promtool check config` accepts with
# deploy/prometheus/local.yml.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEPLOY=$(cd "$HERE/../../deploy/prometheus" && pwd)
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-prom-XXXXXX)
pids=()
wpids=()
cleanup() {
    for p in "${wpids[@]}" "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${wpids[@]}" "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
query() { # PromQL: the first value, or nothing
    curl -s --get "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
        /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}

cat >"$work/c.conf" <<EOC
cluster = {
  servers = ["ipc://$work/s0.sock", "ipc://$work/s1.sock"];
  workers = 2;
  consistency = "async";
};
training = { model = "quadratic"; iterations = 1500; dim = 300; lr = 0.05; seed = 3;
             delay_ms = 2.0; delay_dist = "uniform"; delay_jitter_ms = 2.0; };
EOC
sport=()
for s in 0 1; do
    "$BIN/zeps-server" --config "$work/c.conf" --shard $s --metrics-listen 127.0.0.1:0 \
        >"$work/server-$s.log" 2>&1 &
    pids+=($!)
    sport[$s]=$(listen_port "$work/server-$s.log")
done
check "both shards listen (${sport[*]})" test -n "${sport[0]}" -a -n "${sport[1]}"

pport=$(free_port)
sed -e "s|@SHARDS@|\"127.0.0.1:${sport[0]}\", \"127.0.0.1:${sport[1]}\"|" \
    -e "s|@RULES@|$DEPLOY/zeps-alerts.yml|" >"$work/prometheus.yml" <<'EOC'
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["@RULES@"]
scrape_configs:
  - job_name: zeps-server
    static_configs:
      - targets: [@SHARDS@]
  - job_name: zeps-worker
    file_sd_configs:
      - files: ["workers.json"]
        refresh_interval: 1s
EOC
echo '[]' >"$work/workers.json"
promtool check config "$work/prometheus.yml" >"$work/promtool-config.out" 2>&1
check "promtool check config passes on the test's scrape config" test $? -eq 0
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$pport/-/ready" >/dev/null && break
    sleep 0.2
done
check "prometheus is ready on 127.0.0.1:$pport" curl -sf "http://127.0.0.1:$pport/-/ready" -o /dev/null

wport=()
for r in 0 1; do
    "$BIN/zeps-worker" --config "$work/c.conf" --rank $r --metrics-listen 127.0.0.1:0 \
        >"$work/worker-$r.log" 2>&1 &
    wpids+=($!)
done
for r in 0 1; do wport[$r]=$(listen_port "$work/worker-$r.log"); done
printf '[{"targets": ["127.0.0.1:%s", "127.0.0.1:%s"]}]\n' "${wport[0]}" "${wport[1]}" \
    >"$work/workers.json.tmp" && mv "$work/workers.json.tmp" "$work/workers.json"
# while training: the workers' endpoints are scraped
steps=
for _ in $(seq 120); do
    sleep 0.5
    steps=$(query 'sum(zeps_worker_steps_total{job="zeps-worker"})')
    [ -n "$steps" ] && [ "${steps%.*}" -gt 0 ] && break
done
check "prometheus scraped the workers' step counters during training ($steps)" \
    test -n "$steps" -a "${steps%.*}" -gt 0 2>/dev/null
ok_workers=0
for p in "${wpids[@]}"; do wait "$p" && ok_workers=$((ok_workers + 1)); done
wpids=()
check "both workers finished" test $ok_workers -eq 2

"$BIN/zepsctl" stats --config "$work/c.conf" --json >"$work/stats.json" 2>"$work/stats.err"
rc=$?
check "zepsctl stats answers with the cluster idle" test $rc -eq 0
for s in 0 1; do
    want=$(/usr/bin/python3 -c "import json; print([x for x in json.load(open('$work/stats.json')) if x['shard'] == $s][0]['requests'])")
    got=
    for _ in $(seq 60); do # until prometheus has scraped after the STATS request
        got=$(query "zeps_requests_total{instance=\"127.0.0.1:${sport[$s]}\"}")
        [ "$got" = "$want" ] && break
        sleep 0.5
    done
    check "shard $s: prometheus has the scrape taken after STATS (requests $got = $want)" \
        test "$got" = "$want"
    /usr/bin/python3 "$HERE/metrics_compare.py" "$work/stats.json" $s \
        --prom "http://127.0.0.1:$pport" "127.0.0.1:${sport[$s]}" >"$work/compare-$s.out"
    rc=$?
    check "shard $s: prometheus's values equal zepsctl stats ($(tail -1 "$work/compare-$s.out"))" \
        test $rc -eq 0
    grep FAIL "$work/compare-$s.out" | head -5
done
n=$(query 'sum(zeps_push_staleness_versions_count)')
check "tau histograms of both shards in prometheus count every applied push ($n)" \
    test "$n" = "$(/usr/bin/python3 -c "import json; print(sum(t['tau']['n'] for s in json.load(open('$work/stats.json')) for t in s['tables']))")"
rules=$(curl -s "http://127.0.0.1:$pport/api/v1/rules" | grep -o '"health":"ok"' | wc -l)
check "prometheus loaded and evaluates the alert rules ($rules healthy)" test "$rules" -gt 0
check "no rule failed to evaluate" \
    bash -c "! curl -s 'http://127.0.0.1:$pport/api/v1/rules' | grep -q '\"health\":\"err\"'"

# zepsctl local --metrics: an endpoint per process, printed and in a file_sd list
sed -e 's/iterations = 1500/iterations = 200/' -e 's/delay_ms = 2.0/delay_ms = 0.0/' \
    -e "s|$work/s|$work/l|g" "$work/c.conf" >"$work/local.conf"
"$BIN/zepsctl" local --config "$work/local.conf" -q --dir "$work/local" --metrics --timeout 300 \
    >"$work/local.out" 2>&1
rc=$?
check "zepsctl local --metrics exits 0" test $rc -eq 0
check "it printed 4 metrics URLs (2 servers, 2 workers)" \
    test "$(grep -c 'metrics on http://127.0.0.1:[0-9]*/metrics' "$work/local.out")" -eq 4
check "the servers' logs name the ports it printed" \
    grep -q "listening on 127.0.0.1:$(grep 'server 1 metrics' "$work/local.out" | grep -o '[0-9]*/metrics' | cut -d/ -f1)" \
    "$work/local/server-1.log"
sed "s|/var/lib/zeps/local/prometheus-targets.json|$work/local/prometheus-targets.json|" \
    "$DEPLOY/local.yml" >"$work/local.yml"
cp "$DEPLOY/zeps-alerts.yml" "$work/" # local.yml names it beside itself
promtool check config "$work/local.yml" >"$work/promtool-local.out" 2>&1
rc=$?
check "promtool check config accepts deploy/prometheus/local.yml with its targets" test $rc -eq 0
check "the targets file is JSON with 4 targets" /usr/bin/python3 -c \
    "import json,sys; d=json.load(open('$work/local/prometheus-targets.json')); sys.exit(len(d) != 4)"

echo "$pass passed, $fail failed"
test "$fail" -eq 0
