#!/usr/bin/env bash
# test_deps.sh - the main job installs what it runs, the test command the
# rest, and every feature's docs name a group that exists
# (deploy/install-deps.sh):
#  - the `core` group holds none of the packages only tests or other
#    features use (Slurm, munge, Prometheus, PyTorch, clang/libFuzzer,
#    nftables, Check, Node.js, ZooKeeper);
#  - deploy/local/run.sh and run-ctr.sh install `core`, tests/run.sh `tests`,
#    and `tests` holds every other group;
#  - a new build tree configured without options (the main job's) builds
#    neither the tests nor the Python package (they need those groups);
#  - every `install-deps.sh GROUP` the README and docs/ name lists packages.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deps=$src/deploy/install-deps.sh

core=$(bash "$deps" --list core)
check "install-deps.sh --list core lists the build and run packages" grep -qx libzmq3-dev <<<"$core"
for p in slurm-wlm munge prometheus python3-torch python3-pytest clang libfuzzer-14-dev nftables \
    zookeeper check nodejs strace; do
    check "core does not install $p (the tests or another feature need it)" \
        test -z "$(grep -x -- "$p" <<<"$core")"
done
check "deploy/local/run.sh installs core" grep -q 'install-deps.sh" core' "$src/deploy/local/run.sh"
check "deploy/local/run-ctr.sh installs core" grep -q 'install-deps.sh" core' "$src/deploy/local/run-ctr.sh"
check "tests/run.sh installs tests" grep -q 'install-deps.sh" tests' "$src/tests/run.sh"
tests=$(bash "$deps" --list tests)
for g in core python study prometheus slurm netns fuzz zk; do
    missing=$(comm -23 <(bash "$deps" --list $g) <(echo "$tests"))
    check "tests holds every package of $g${missing:+ (not: $missing)}" test -z "$missing"
done
check "an unknown group is refused (exit 2)" bash -c "bash '$deps' nosuch >/dev/null 2>&1; [ \$? -eq 2 ]"
check "build.sh configures a new tree without tests or Python" \
    grep -q 'set -- -DZEPS_TESTS=OFF -DZEPS_PYTHON=OFF' "$src/deploy/build.sh"

named=$(grep -rhoE 'install-deps\.sh [a-z]+( [a-z]+)*' "$src/README.md" "$src/docs" | cut -d' ' -f2- |
    tr ' ' '\n' | sort -u)
for g in $named; do
    check "the docs' install-deps.sh $g lists packages" test -n "$(bash "$deps" --list "$g" 2>/dev/null)"
done
check "the docs name install-deps.sh groups (python at least)" grep -qx python <<<"$named"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
