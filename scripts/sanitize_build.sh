#!/usr/bin/env bash
# Configures and builds build-sanitize/: clang, CPU only, RelWithDebInfo, ASan + UBSan, with the
# libFuzzer targets (-DSTEPGRAPH_FUZZ=ON). One build folder serves both scripts/sanitize.sh (the
# test suite under the sanitizers) and scripts/fuzz.sh: the library is compiled once.
#
#   bash scripts/sanitize_build.sh [TARGET...]     (no target: everything)
#
# Exits with status 2 when clang++ is not installed (callers report it as skipped).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CXX_CLANG=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$CXX_CLANG" ]; then
  echo "sanitize_build: clang++ is not installed (scripts/setup.sh installs it)" >&2
  exit 2
fi

if [ -f build-sanitize/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build-sanitize/CMakeCache.txt; then
  echo "sanitize_build: build-sanitize/ was configured with another generator; rm -rf build-sanitize" >&2
  exit 1
fi
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$CXX_CLANG" \
  -DSTEPGRAPH_CUDA=OFF -DSTEPGRAPH_TESTS=ON -DSTEPGRAPH_FUZZ=ON >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build-sanitize -j "$(nproc)" "${targets[@]}"
