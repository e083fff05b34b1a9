#!/usr/bin/env bash
# Installs the dependencies and builds stepgraph (Release, with its tests) in build/. Used by
# quickstart.sh and test.sh.
#
# Environment: SG_CUDA_ARCH sets CMAKE_CUDA_ARCHITECTURES (e.g. "80;90"); unset, CMakeLists.txt
# picks this machine's GPU, or sm_90 when there is none (what CI builds).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

# The CUDA backend is built when nvcc is found.
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

if [ -f build/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build/CMakeCache.txt; then
  echo "build: build/ was configured with another CMake generator; remove it (rm -rf build) and rerun" >&2
  exit 1
fi

cmake_args=(-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTEPGRAPH_TESTS=ON)
if [ -n "${SG_CUDA_ARCH:-}" ]; then
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=${SG_CUDA_ARCH}")
else
  # Let CMakeLists.txt choose, also when an earlier configure left another value in the cache.
  cmake_args+=(-UCMAKE_CUDA_ARCHITECTURES)
fi
cmake "${cmake_args[@]}"
cmake --build build -j "$(nproc)"
