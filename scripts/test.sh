#!/usr/bin/env bash
# The second command on a fresh machine (and what CI runs): install the dependencies, build
# stepgraph with its tests (Release, in build/), run every test with ctest, and the self-test of
# the benchmark script. Exits non-zero when anything fails.
#
#   bash scripts/test.sh
#
# GPU tests skip themselves on a machine without a GPU (they print "no GPU: ..."); with a GPU
# they run too. Environment: SG_CUDA_ARCH sets CMAKE_CUDA_ARCHITECTURES; unset, the build is
# kept lean: sm_90 only without a GPU, this machine's GPU with one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

# The CUDA backend is built when nvcc is found.
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

if [ -f build/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build/CMakeCache.txt; then
  echo "test: build/ was configured with another CMake generator; remove it (rm -rf build) and rerun" >&2
  exit 1
fi

cmake_args=(-S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTEPGRAPH_TESTS=ON)
if [ -n "${SG_CUDA_ARCH:-}" ]; then
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=${SG_CUDA_ARCH}")
elif nvidia-smi -L >/dev/null 2>&1; then
  cmake_args+=(-UCMAKE_CUDA_ARCHITECTURES)  # CMakeLists.txt picks this machine's GPU ("native")
else
  cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES=90)
fi
cmake "${cmake_args[@]}"
cmake --build build -j "$(nproc)"

failed=()
echo
echo "test: ctest"
ctest --test-dir build --output-on-failure -j "$(nproc)" || failed+=("ctest")

echo
echo "test: the Python package (pip install . into build/pyenv, then pytest)"
bash scripts/test_python.sh || failed+=("python tests")

echo
echo "test: bench/bench_vs_torch.py --self-test"
python3 bench/bench_vs_torch.py --self-test || failed+=("bench_vs_torch.py --self-test")

echo
if [ ${#failed[@]} -ne 0 ]; then
  echo "test: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test: all passed"
