#!/usr/bin/env bash
# campaign.sh FUZZ_BUILD_DIR TARGET SECONDS [WORKDIR]: a long fuzzing run of
# one target (docs/testing.md, "Fuzzing"). The working corpus is WORKDIR
# (default /tmp/zeps-fuzz-campaign/TARGET), seeded from tests/fuzz/corpus/
# TARGET and kept between runs, so a campaign can be continued; findings
# go to WORKDIR/../TARGET-crash-* (and timeout-, oom-, leak-). Runs at
# nice 19 (the machine is shared). Prints libFuzzer's final line (execs,
# cov:, ft:, corpus) and the CPU time it used.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: campaign.sh FUZZ_BUILD_DIR TARGET SECONDS [WORKDIR]}
target=${2:?target: server codec snapshot config client}
secs=${3:?seconds}
work=${4:-${TMPDIR:-/tmp}/zeps-fuzz-campaign/$target}
mkdir -p "$work"
cp -n "$here/corpus/$target"/* "$work/"
# shellcheck source=fuzz_env.sh
. "$here/fuzz_env.sh"
log=$work/../$target-campaign.log
TIMEFORMAT="cpu: user %U s, sys %S s, wall %R s"
rc=0
{ time nice -n 19 "$build/bin/fuzz_$target" -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=3072 -print_final_stats=1 -artifact_prefix="$work/../$target-" \
    "$work" >"$log" 2>&1; } 2>"$log.time" || rc=$?
grep -E '^#[0-9]+ +(DONE|INITED)' "$log" | tail -2
grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" || true
cat "$log.time"
ls "$work/.." | grep -E "^$target-(crash|timeout|oom|leak)-" || echo "no findings"
exit $rc
