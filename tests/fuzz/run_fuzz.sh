#!/usr/bin/env bash
# run_fuzz.sh TARGET BINARY [SECONDS]: the ctest entry fuzz_TARGET. Runs the
# libFuzzer binary for SECONDS (default 20) on the seed corpus
# tests/fuzz/corpus/TARGET, which it only reads: new inputs go to a scratch
# directory removed at the end. A crash, sanitizer report, timeout (10 s per
# input) or memory blow-up (3 GB) fails the entry and leaves the input as
# crash-TARGET-* (or timeout-/oom-/leak-) in the current directory.
# libFuzzer's progress lines go to TARGET.log in the current directory; what
# is printed is its closing lines, and on a failure the report (the lines
# from the first sanitizer or libFuzzer error on) and the input's base64.
set -euo pipefail
target=$1 bin=$2 secs=${3:-20}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-fuzz-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# shellcheck source=fuzz_env.sh
. "$here/fuzz_env.sh"
log=$PWD/$target.log
rc=0
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=3072 -print_final_stats=1 \
    -artifact_prefix="$PWD/$target-" "$scratch" "$here/corpus/$target" >"$log" 2>&1 || rc=$?
grep -E '^#[0-9]+ +(INITED|DONE)|^stat::(number_of_executed_units|peak_rss_mb)' "$log" || true
if [ "$rc" != 0 ]; then
    echo "fuzz_$target failed (exit $rc); the report (whole log: $log):"
    awk '/==[0-9]+==|ERROR: libFuzzer|^fuzz_|runtime error|SUMMARY/ {on = 1} on' "$log" | head -80
fi
exit "$rc"
