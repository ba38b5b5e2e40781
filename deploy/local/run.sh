#!/usr/bin/env bash
# The main job: install what is missing, build, and train on a local
# cluster (2 servers, 4 workers, an MLP on Fashion-MNIST, BSP by default).
# Arguments go to `zepsctl local` (see `zepsctl local --help`), e.g.
#   bash deploy/local/run.sh --consistency async
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bash "$src/deploy/install-deps.sh" core # what the job runs; the tests install the rest
bash "$src/deploy/build.sh" >/dev/null
exec "${ZEPS_BUILD_DIR:-$src/build}/bin/zepsctl" local "$@"
