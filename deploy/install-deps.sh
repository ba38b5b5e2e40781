#!/usr/bin/env bash
# Install what zeps needs, from the Debian archive, by feature:
#
#   bash deploy/install-deps.sh [GROUP...]      (default: core)
#   bash deploy/install-deps.sh --list GROUP    (print the group's packages)
#
# core        build and run the daemons, zepsctl and the main job (the MLP on
#             Fashion-MNIST; the CTR job generates its own data)
# python      the Python package and zeps.torch (worker/python, docs/python.md)
# study       the plots of zepsctl study / scale / the compression studies
# prometheus  Prometheus and promtool (docs/operations.md, "Metrics")
# slurm       Slurm and munge (deploy/slurm, docs/operations.md)
# netns       ip and nftables: test hosts in network namespaces
# fuzz        clang and libFuzzer (tests/fuzz)
# coverage    gcovr (tests/coverage.sh, docs/testing.md "Coverage")
# zk          ZooKeeper: the server (jars and scripts, no system service: the
#             tests and zepsctl start their own) and the C client library
#             the shard's coordination layer links (docs/replication.md)
# tests       everything the test suite uses: all of the above, Check,
#             systemd-analyze, strace, and Node.js for the deployment checks
# all         the same as tests
#
# Only missing packages are installed; a machine that has them all is left
# alone (no apt-get update). Needs root, or sudo.
set -euo pipefail

group() { # name: its packages, one word each
    case $1 in
    core)
        echo build-essential cmake pkg-config \
            libzmq3-dev libprotobuf-c-dev protobuf-c-compiler libuv1-dev \
            libopenblas-dev libconfig-dev zlib1g-dev libisal-dev libxxhash-dev \
            libhttp-parser-dev librocksdb-dev dataset-fashion-mnist
        ;;
    python) echo python3 python3-dev python3-cffi python3-numpy python3-pytest python3-torch ;;
    study) echo python3 gnuplot-nox ;;
    prometheus) echo prometheus ;;
    slurm) echo slurm-wlm munge ;;
    netns) echo iproute2 nftables ;;
    fuzz) echo clang libfuzzer-14-dev ;;
    coverage) echo gcovr ;;
    zk) echo zookeeper libzookeeper-st-dev ;;
    tests | all)
        local g
        for g in core python study prometheus slurm netns fuzz zk; do group $g; done
        echo check libsubunit-dev systemd strace
        # the deployment checks (tests/system/deploy-check: npm ci of the
        # committed lock file) need Node.js and npm: a machine that already
        # has them (e.g. from NodeSource, whose nodejs conflicts with
        # Debian's npm) keeps its own
        if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
            echo nodejs npm
        fi
        ;;
    *)
        echo "install-deps: unknown group '$1' (core, python, study, prometheus, slurm, netns," \
            "fuzz, coverage, zk, tests, all)" >&2
        return 1
        ;;
    esac
}

if [ "${1:-}" = --list ]; then
    group "${2:-core}" | tr ' ' '\n' | grep -v '^$' | sort -u
    exit 0
fi
PACKAGES=()
for g in "${@:-core}"; do
    list=$(group "$g") || exit 2
    read -r -a more <<<"$(echo $list)"
    PACKAGES+=("${more[@]}")
done

# One dpkg-query for all of them (a call per package took a second).
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null |
    awk '$NF == "installed" && $(NF-1) == "ok" { print $1 }' || true)
missing=()
for p in $(printf '%s\n' "${PACKAGES[@]}" | sort -u); do
    grep -qx -- "$p" <<<"$installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then
        SUDO=(sudo)
    else
        echo "install-deps: missing packages (${missing[*]}) and not root; run as root or install them" >&2
        exit 1
    fi
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
