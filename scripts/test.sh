#!/usr/bin/env bash
# The second command on a fresh machine (and what CI runs): install the dependencies, build
# stepgraph with its tests (Release, in build/), run every test with ctest, the Python package's
# tests and its wheel (built, repaired, installed into a fresh venv), and the self-tests of the
# benchmark scripts; with clang, the CPU tests again under ASan + UBSan and a short fuzz run
# (scripts/sanitize.sh, scripts/fuzz.sh --ci). Exits non-zero when anything fails.
#
#   bash scripts/test.sh
#
# GPU tests skip themselves on a machine without a GPU (they print "no GPU: ..."); with a GPU
# they run too. Environment: SG_CUDA_ARCH sets CMAKE_CUDA_ARCHITECTURES; unset, the build is
# kept lean: sm_90 only without a GPU, this machine's GPU with one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/build.sh

failed=()
echo
echo "test: ctest"
ctest --test-dir build --output-on-failure -j "$(nproc)" || failed+=("ctest")

echo
echo "test: the Python package (pip install . into build/pyenv, then pytest)"
bash scripts/test_python.sh || failed+=("python tests")

# The wheel of the kind just built (test_python.sh's rule for SG_PY_CUDA), from the same build
# folder, so only the packaging is new: auditwheel, a fresh venv, the smoke test.
wheel_kind=cpu
if [ "${SG_PY_CUDA:-}" = 1 ] || { [ -z "${SG_PY_CUDA:-}" ] && nvidia-smi -L >/dev/null 2>&1; }; then wheel_kind=cuda; fi
venv=${SG_PY_VENV:-build/pyenv}
echo
echo "test: the $wheel_kind wheel (scripts/build_wheels.sh $wheel_kind with the Python tests' build)"
SG_WHEEL_PYTHON=$([ "$venv" = none ] && command -v python3 || echo "$venv/bin/python") \
  bash scripts/build_wheels.sh "$wheel_kind" || failed+=("the $wheel_kind wheel")

echo
echo "test: the shell scripts parse (bash -n; gpu_check.sh runs only on the GPU machine)"
for f in scripts/*.sh .ci/run; do
  bash -n "$f" || failed+=("bash -n $f")
done

echo
echo "test: bench/bench_vs_torch.py --self-test"
python3 bench/bench_vs_torch.py --self-test || failed+=("bench_vs_torch.py --self-test")

echo
echo "test: bench/bench_pinn_vs_torch.py --self-test"
python3 bench/bench_pinn_vs_torch.py --self-test || failed+=("bench_pinn_vs_torch.py --self-test")

echo
echo "test: bench/bench_cnn_vs_torch.py --self-test"
python3 bench/bench_cnn_vs_torch.py --self-test || failed+=("bench_cnn_vs_torch.py --self-test")

echo
echo "test: bench/bench_ops_vs_torch.py --self-test"
python3 bench/bench_ops_vs_torch.py --self-test || failed+=("bench_ops_vs_torch.py --self-test")

echo
echo "test: the code's layout rules (scripts/check_layout.py: file sizes, include directions)"
python3 scripts/check_layout.py --self-test || failed+=("check_layout.py --self-test")
python3 scripts/check_layout.py || failed+=("check_layout.py")

echo
echo "test: bench/ab_builds.py --self-test"
python3 bench/ab_builds.py --self-test || failed+=("ab_builds.py --self-test")

# ASan + UBSan and the fuzzers need clang (scripts/setup.sh installs it); one clang build in
# build-sanitize/ serves both (docs/fuzzing.md).
echo
if command -v clang++ >/dev/null 2>&1 || command -v clang++-14 >/dev/null 2>&1; then
  echo "test: the CPU test suite under ASan + UBSan (scripts/sanitize.sh, clang, build-sanitize/)"
  bash scripts/sanitize.sh || failed+=("sanitize.sh")
  echo
  echo "test: the fuzz corpus once, then each fuzz target for 20 s (scripts/fuzz.sh --ci)"
  bash scripts/fuzz.sh --ci || failed+=("fuzz.sh --ci")
else
  echo "test: SKIPPED the sanitizer tests and the fuzzers: no clang++ (scripts/setup.sh installs it)"
fi

echo
if [ ${#failed[@]} -ne 0 ]; then
  echo "test: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test: all passed"
