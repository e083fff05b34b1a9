#!/usr/bin/env bash
# The first command on a fresh machine: install the dependencies, build stepgraph (Release, in
# build/) and train the embedded default model (an MLP on the digits data) with
# `build/stepgraph train`. On a machine with a GPU it trains there; without one it says so and
# trains on the CPU reference backend.
#
#   bash scripts/quickstart.sh [ARGS for `stepgraph train`...]
#   bash scripts/quickstart.sh --json --steps 500
#
# Environment: SG_CUDA_ARCH sets CMAKE_CUDA_ARCHITECTURES (e.g. "80;90"); unset, CMake picks the
# GPU of this machine, or sm_90 when there is none.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/build.sh

# A demo run: running the quick start again replaces its own earlier run (runs/default) instead of
# being refused as a second run into that folder.
echo
echo "quickstart: training the default model (an MLP on the digits data): build/stepgraph train --overwrite${*:+ $*}"
build/stepgraph train --overwrite "$@"
