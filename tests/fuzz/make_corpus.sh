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
# fuzz_shm (its layout: tests/fuzz/fuzz_shm.c): a request written, taken,
# released and answered, then its buffer reused and the old descriptor
# taken again (stale); two requests, one held while the other is reused;
# a descriptor with its offset and its length flipped
mkdir -p "$here/corpus/shm"
alloc='\x00\x00\x64\x00\x00\x00' alloc1='\x00\x01\x00\x10\x00\x00'
take='\x01\x00\x01\x00\x00\x00\x00' take1='\x01\x00\x01\x01\x00\x00\x00'
printf "$alloc$take\x02\x00\x03\x00$alloc\x01\x00\x01\x00\x00\x00\x01\x01" >"$here/corpus/shm/stale"
printf "$alloc$alloc1$take$take1\x02\x01\x03\x01$alloc1$take1\x02\x00" >"$here/corpus/shm/held"
printf "$alloc\x01\x00\x01\x00\x01\x40\x00\x00\x00\x01\x00\x00\x01\x10\x05\x00" >"$here/corpus/shm/flipped"
du -sh "$here/corpus"
