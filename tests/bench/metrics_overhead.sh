#!/usr/bin/env bash
# metrics_overhead.sh - what serving and scraping /metrics costs the hot
# path: `zepsctl bench --only zeps` push+pull at 64 B and 4 MB, its server
# started without a metrics endpoint (reference) and with one scraped every
# second by curl (ZEPS_METRICS_LISTEN reaches the server zepsctl bench
# starts). The two alternate ROUNDS times (off, on, off, on, ...) so load
# from other processes falls on both alike; the medians over the rounds and
# their ratios (on / off, 1.00 = no cost) are printed and written to
# $1 (default metrics-overhead.json). A benchmark: it reports, it does not
# fail on the ratio (a loaded machine skews single runs).
#
#   bash tests/bench/metrics_overhead.sh [OUT.json] [ROUNDS]
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
out=${1:-metrics-overhead.json}
rounds=${2:-5}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-mover-XXXXXX)
scraper=
trap '[ -n "$scraper" ] && kill "$scraper" 2>/dev/null; rm -rf "$work"' EXIT

for i in $(seq "$rounds"); do
    for mode in off on; do
        if [ $mode = on ]; then
            port=$(free_port)
            export ZEPS_METRICS_LISTEN=127.0.0.1:$port
            (while :; do
                curl -s -o /dev/null "http://127.0.0.1:$port/metrics"
                sleep 1
            done) &
            scraper=$!
        else
            unset ZEPS_METRICS_LISTEN
        fi
        "$BIN/zepsctl" bench --only zeps --sizes 64,4M --reps 3 --seconds 1 \
            --json "$work/$mode-$i.json" >"$work/$mode-$i.out" 2>&1 ||
            { echo "zepsctl bench failed:"; tail -5 "$work/$mode-$i.out"; exit 1; }
        if [ -n "$scraper" ]; then
            kill "$scraper"
            wait "$scraper" 2>/dev/null
            scraper=
        fi
    done
done
unset ZEPS_METRICS_LISTEN
/usr/bin/python3 - "$work" "$rounds" "$out" <<'EOF'
import json, statistics, sys
work, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
keys = ["push_pull_MBps", "push_rtt_p50_us", "pull_rtt_p50_us"]
res = {}
for mode in ("off", "on"):
    runs = [json.load(open(f"{work}/{mode}-{i}.json"))["results"] for i in range(1, rounds + 1)]
    for j, cell in enumerate(runs[0]):
        for k in keys:
            res.setdefault(cell["bytes"], {}).setdefault(k, {})[mode] = statistics.median(
                r[j]["zeps"][k] for r in runs)
print(f"zepsctl bench push+pull, {rounds} alternating rounds each, medians; ratio = scraped / off")
for size, ks in res.items():
    for k, v in ks.items():
        v["ratio"] = round(v["on"] / v["off"], 3) if v["off"] else None
        print(f"  {size:>8} B  {k:<16} off {v['off']:>10.1f}  scraped {v['on']:>10.1f}  ratio {v['ratio']}")
json.dump({"rounds": rounds, "command": "bash tests/bench/metrics_overhead.sh",
           "results": {str(s): ks for s, ks in res.items()}}, open(out, "w"), indent=1)
EOF
