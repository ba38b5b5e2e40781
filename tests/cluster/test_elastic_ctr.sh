#!/usr/bin/env bash
# The CTR job (a zeps_pipe trainer) through a live `zepsctl shards add` and
# `zepsctl shards remove 3` at a small size: tests/bench/bench_elastic.py
# --check on 100,000 generated examples, without the undisturbed run and
# the raw reference (docs/elastic.md, "The CTR job 3 -> 4 -> 3"). Fails if
# a worker fails (a pipe step's clocked push not followed after EMOVED, a
# CLOCK to the stopped shard), a command fails, the workers did not train
# during a command or on after shard 3 stopped (it is stopped once no
# worker clocks there), rows per shard are not within +-10 % after the add,
# shard 3 holds a row after its removal, or the pushes the shards applied
# differ from those the workers counted acknowledged.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${ZEPS_BINDIR:?ZEPS_BINDIR not set}
dir=$(mktemp -d "${TMPDIR:-/tmp}/zeps-elastic-ctr-XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$bin/zepsctl" gen-criteo --out "$dir/data" --train 100000 --test 10000 --seed 3 >/dev/null
ZEPS_CTR_DATA=$dir/data /usr/bin/python3 "$src/tests/bench/bench_elastic.py" --bin "$bin" \
    --dir "$dir/runs" --epochs 100 --before 1.5 --gap 1.5 --no-baseline --no-raw --check
