#!/usr/bin/env bash
# `cmake --install` puts the Python package where Debian's python3 finds it
# beside the installed libzeps.so: install the build tree into a fresh
# prefix, then import zeps from outside the source and build trees and
# check that both the package and the library it loaded are the installed
# ones. Then one real call (rank resolution through libzeps), and that
# libzeps.pc names the prefix installed to.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
build=${ZEPS_BUILD_DIR:?}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
site=$(ls -d "$prefix"/lib/python3*/dist-packages)
out=$(cd / && env -u LD_LIBRARY_PATH PYTHONPATH="$site" ZEPS_RANK=7 /usr/bin/python3 -c '
import zeps, zeps._native
print(zeps.__file__)
print(zeps.rank_from_env())
print([l.split()[-1] for l in open("/proc/self/maps") if "libzeps.so" in l][0])')
echo "$out"
pkg=$(sed -n 1p <<<"$out") rank=$(sed -n 2p <<<"$out") lib=$(sed -n 3p <<<"$out")
check "package imported from the install ($pkg)" test "${pkg#"$prefix"/}" != "$pkg"
check "libzeps.so loaded from the install ($lib)" test "${lib#"$prefix"/}" != "$lib"
check "rank resolved through libzeps" test "$rank" = 7
# libzeps.pc describes the prefix it was installed to, not the configured one
inc=$(PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name libzeps.pc | head -1)") \
    pkg-config --variable=includedir libzeps)
check "libzeps.pc points into the install ($inc)" test -f "$inc/zeps/zeps.h"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
