#!/usr/bin/env bash
# make_corpus.sh FUZZ_BUILD_DIR: write the seed corpus tests/fuzz/corpus/
# afresh: fuzz_seeds (built in the fuzz tree, -DZEPS_FUZZ=ON) records real
# messages, replies, codec payloads and snapshot files; the cluster-file
# seeds are the example files of deploy/.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:?usage: make_corpus.sh FUZZ_BUILD_DIR}
rm -rf "$here/corpus"
"$build/bin/fuzz_seeds" "$here/corpus"
mkdir -p "$here/corpus/config"
for f in "$src"/deploy/systemd/cluster.conf "$src"/deploy/local/*.conf; do
    cp "$f" "$here/corpus/config/$(basename "$(dirname "$f")")-$(basename "$f")"
done
du -sh "$here/corpus"
