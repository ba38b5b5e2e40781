#!/usr/bin/env bash
# test_scratch.sh - tests write where TMPDIR says, and leave nothing behind,
# passed or failed (docs/testing.md, "Scratch folders"):
#  - no test source makes its scratch folder under a hard-coded /tmp;
#  - a Check program (zt_scratch_probe) makes its folders under $TMPDIR and
#    none is left after it, also when its assertion fails (Check's forked
#    test ends with _exit: zt_run_suite removes the root afterwards); with
#    ZEPS_TEST_KEEP the root stays;
#  - a shell test (exit_codes) run with TMPDIR set leaves nothing there.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
T=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-scratch-XXXXXX)
trap 'rm -rf "$T"' EXIT

hard=$(grep -rnE 'mktemp -d /tmp|"/tmp/[^"]*XXXXXX' "$src/tests" "$src/worker/python/tests" \
    --include='*.sh' --include='*.c' --include='*.h' --include='*.py' | grep -v test_scratch.sh)
check "no test makes its scratch folder under a hard-coded /tmp${hard:+: $hard}" test -z "$hard"

empty() { [ -z "$(ls -A "$1")" ]; }
for planted in "" 1; do # the counters of lib.sh are pass and fail
    mkdir -p "$T/p$planted"
    out=$(TMPDIR=$T/p$planted ZT_PROBE_FAIL=$planted "$BIN/zt_scratch_probe" 2>&1)
    rc=$?
    dir=$(sed -n 's/^scratch folder //p' <<<"$out")
    what=${planted:+failing }
    check "a ${what}Check test makes its folder under TMPDIR ($dir)" \
        test "${dir#"$T/p$planted/zt-"}" != "$dir"
    if [ -n "$planted" ]; then
        check "the failing test fails (exit $rc)" test $rc -ne 0
    else
        check "the passing test passes (exit $rc)" test $rc -eq 0
    fi
    check "a ${what}Check test leaves nothing in TMPDIR" empty "$T/p$planted"
done
mkdir -p "$T/keep"
out=$(TMPDIR=$T/keep ZEPS_TEST_KEEP=1 "$BIN/zt_scratch_probe" 2>&1)
check "ZEPS_TEST_KEEP keeps the root and says where" grep -q "^kept $T/keep/zt-" <<<"$out"

mkdir -p "$T/sh"
TMPDIR=$T/sh bash "$src/tests/cluster/test_exit_codes.sh" >"$T/exit_codes.out" 2>&1
check "a shell test (exit_codes) passes with TMPDIR set" test $? -eq 0
check "a shell test leaves nothing in TMPDIR" empty "$T/sh"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
