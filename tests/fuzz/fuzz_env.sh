# fuzz_env.sh: the sanitizer settings every fuzz run uses (sourced by
# run_fuzz.sh and campaign.sh; $here is tests/fuzz).
#
# One allocation over 64 MiB fails (returns NULL) instead of stopping the run
# as an out-of-memory finding: a DECLARE of a table of 2^33 floats, say, must
# then be answered ENOMEM, which is the path fuzzed. (How much a peer may make
# a shard hold in total is a limit of the shard's, not of one allocation.)
export ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=64${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# Leaks inside Debian's libconfig 1.5 (its scanner loses the string it was
# reading when the text has a syntax error) are not ours to fix.
export LSAN_OPTIONS="suppressions=$here/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
