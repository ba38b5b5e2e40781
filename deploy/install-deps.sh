#!/usr/bin/env bash
# Install what zeps needs to build, test and run, from the Debian archive.
# Only missing packages are installed; a machine that has them all is left
# alone (no apt-get update). Needs root, or sudo.
set -euo pipefail

PACKAGES=(
    build-essential cmake pkg-config
    libzmq3-dev libprotobuf-c-dev protobuf-c-compiler libuv1-dev
    libopenblas-dev libconfig-dev zlib1g-dev libisal-dev libxxhash-dev
    libhttp-parser-dev     # the metrics endpoints (common/http.c)
    prometheus             # tests: prometheus scrapes a cluster; promtool checks metrics and rules
    check libsubunit-dev
    dataset-fashion-mnist
    iproute2 nftables
    systemd slurm-wlm munge strace
    python3 gnuplot-nox    # deploy/local/*-study.sh (compression studies)
    python3-dev python3-cffi python3-numpy python3-pytest python3-torch  # worker/python
    clang libfuzzer-14-dev # tests/fuzz (libFuzzer targets, ZEPS_FUZZ=ON)
)
# The deployment checks (tests/system/deploy-check: npm ci of the committed lock
# file) need Node.js and npm: a machine that already has them (e.g. from
# NodeSource, whose nodejs conflicts with Debian's npm) keeps its own;
# otherwise Debian's are installed.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    PACKAGES+=(nodejs npm)
fi

# One dpkg-query for all of them (a call per package took a second).
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null |
    awk '$NF == "installed" && $(NF-1) == "ok" { print $1 }' || true)
missing=()
for p in "${PACKAGES[@]}"; do
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
