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

bash scripts/setup.sh

# The CUDA backend is built when nvcc is found.
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

if [ -f build/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build/CMakeCache.txt; then
  echo "quickstart: build/ was configured with another CMake generator; remove it (rm -rf build) and rerun" >&2
  exit 1
fi

cmake_args=(-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release)
if [ -n "${SG_CUDA_ARCH:-}" ]; then
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=${SG_CUDA_ARCH}")
else
  # Let CMakeLists.txt choose (this machine's GPU, else sm_90), also when an earlier configure
  # of build/ (e.g. scripts/test.sh with SG_CUDA_ARCH) left another value in the cache.
  cmake_args+=(-UCMAKE_CUDA_ARCHITECTURES)
fi
cmake "${cmake_args[@]}"
cmake --build build -j "$(nproc)"

echo
echo "quickstart: training the default model (an MLP on the digits data): build/stepgraph train${*:+ $*}"
build/stepgraph train "$@"
