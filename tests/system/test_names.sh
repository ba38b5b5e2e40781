#!/usr/bin/env bash
# test_names.sh - the naming rule of docs/architecture.md ("Names") over the
# built objects: every global symbol that a .c file under common/, server/
# or worker/ (not worker/python) defines is zeps_* (public API), main, or
# zp_<file> / zp_<file>_* where <file> is the source's base name (ops tables
# included: zp_<file>_ops, zp_<file>_<name>_ops). Allowed exceptions would
# be listed below, each with its reason (there are none). Fails naming every file and symbol
# that breaks the rule; exits 77 (skip) without nm or a built tree.
set -u
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
BUILD=${ZEPS_BUILD_DIR:-$(dirname "$BIN")}
command -v nm > /dev/null || { echo "skip: no nm"; exit 77; }

# file: extended regex of the extra names it may define, and why.
declare -A allow=(
)

# object of each source: <build>/<dir>/CMakeFiles/<target>.dir/<rest>.c.o
# (libzeps.so's own copies of worker/lib are the same sources again).
declare -A obj
while read -r o; do
    rel=${o#"$BUILD"/}
    rel=$(sed -E 's#CMakeFiles/[^/]+\.dir/##; s#\.o$##' <<< "$rel")
    [ -z "${obj[$rel]:-}" ] && obj[$rel]=$o
done < <(find "$BUILD" -path '*/CMakeFiles/*.dir/*' -name '*.c.o' ! -path '*/zeps.dir/*')

n=0
bad=0
while read -r c; do
    o=${obj[$c]:-}
    if [ -z "$o" ]; then
        echo "FAIL - $c: no object in $BUILD"
        bad=$((bad + 1))
        continue
    fi
    b=$(basename "$c" .c)
    extra=${allow[$c]:-}
    re="^(zeps_.*|main|zp_${b}|zp_${b}_.*${extra:+|$extra})\$"
    # __*: what compilers and sanitizers add (ASan's __odr_asan.<name>)
    off=$(nm --defined-only -g "$o" | awk '{print $3}' | grep -v '^__' | grep -Ev "$re" | tr '\n' ' ')
    n=$((n + 1))
    if [ -n "$off" ]; then
        echo "FAIL - $c defines $off(want zp_${b}_*)"
        bad=$((bad + 1))
    fi
done < <(cd "$src" && find common server worker -name '*.c' ! -path 'worker/python/*' | sort)
echo "$n files checked, $bad breaking the rule"
[ "$bad" -eq 0 ]
