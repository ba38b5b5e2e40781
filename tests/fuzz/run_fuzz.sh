#!/usr/bin/env bash
# run_fuzz.sh TARGET BINARY [SECONDS]: the ctest entry fuzz_TARGET. Runs the
# libFuzzer binary for SECONDS (default 20) on the seed corpus
# tests/fuzz/corpus/TARGET, which it only reads: new inputs go to a scratch
# directory removed at the end. A crash, sanitizer report, timeout (10 s per
# input) or memory blow-up (3 GB) fails the entry and leaves the input as
# crash-TARGET-* (or timeout-/oom-/leak-) in the current directory.
set -euo pipefail
target=$1 bin=$2 secs=${3:-20}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
scratch=$(mktemp -d /tmp/zeps-fuzz-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# shellcheck source=fuzz_env.sh
. "$here/fuzz_env.sh"
exec "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=3072 -print_final_stats=1 \
    -artifact_prefix="$PWD/$target-" "$scratch" "$here/corpus/$target"
