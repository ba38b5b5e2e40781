#!/usr/bin/env bash
# test_prefetch.sh - a build check: the compiler kept the software
# prefetches of the sparse hot paths. gcc deleted them twice, silently: a
# `static inline void` helper holding only __builtin_prefetch counts as free
# of side effects and its calls are dropped before inlining (the helpers
# are always_inline since; docs/sparse.md, steps 8 and 9). This reads the
# built objects with objdump and fails naming every function whose
# prefetch instructions are gone. In a Debug build (no inlining: the
# prefetches sit in the helpers) it skips, saying so.
#   env: ZEPS_BUILD_DIR (the build tree), ZEPS_BUILD_TYPE (its CMAKE_BUILD_TYPE)
set -u
BUILD=${ZEPS_BUILD_DIR:?ZEPS_BUILD_DIR must name the build tree}
case ${ZEPS_BUILD_TYPE:-} in
Debug | "") echo "skip: a ${ZEPS_BUILD_TYPE:-default} build inlines nothing"; exit 77 ;;
esac
command -v objdump >/dev/null || { echo "skip: no objdump"; exit 77; }

# source file (under the build tree's object folders), function, least
# prefetch instructions
CHECKS="table/sparse.c probe 2
table/sparse.c zp_sparse_pull 2
table/sparse.c zp_sparse_push_probed 2
table/rows.c repeated_at 2
models/ctr_math.c zp_ctr_math_pass 4
models/ctr_math.c zp_ctr_math_batch_ids 2
models/ctr_math.c zp_ctr_math_batch_positions 2"
pass=0 fail=0
while read -r file fn least; do
    o=$(find "$BUILD" -path "*/CMakeFiles/*.dir/$file.o" ! -path '*/zeps.dir/*' | head -1)
    if [ -z "$o" ]; then
        echo "FAIL - no object of $file under $BUILD"
        fail=$((fail + 1))
        continue
    fi
    n=$(objdump -d --no-show-raw-insn "$o" |
        awk -v f="<$fn>:" '/^[0-9a-f]+ <.*>:$/ {in_fn = ($2 == f)} in_fn && /prefetch/ {n++} END {print n + 0}')
    if [ "$n" -ge "$least" ]; then
        echo "ok   - $file: $fn has $n prefetch instructions (>= $least)"
        pass=$((pass + 1))
    else
        echo "FAIL - $file: $fn has $n prefetch instructions, expected >= $least: the compiler dropped them"
        fail=$((fail + 1))
    fi
done <<<"$CHECKS"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
