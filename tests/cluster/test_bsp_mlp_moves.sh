#!/usr/bin/env bash
# zeps-worker's MLP under bsp going 2 -> 3 -> 2 shards while it trains ends
# with every worker's final loss, accuracy and loss curve equal to the run
# without moves (tests/cluster/bsp_mlp_moves.py; docs/elastic.md, "Dense
# pieces under bsp"). Needs the Fashion-MNIST files of the model's data_dir.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${ZEPS_BINDIR:?ZEPS_BINDIR not set}
dir=$(mktemp -d "${TMPDIR:-/tmp}/zeps-bsp-mlp-XXXXXX")
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$src/tests/cluster/bsp_mlp_moves.py" --bin "$bin" --dir "$dir"
