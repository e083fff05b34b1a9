#!/usr/bin/env bash
# The whole GPU check in one go, for the GPU machine: every test (CPU and CUDA), the Python
# package's tests, the CLI on the GPU (default run, PINN accuracy runs, verify mode), and the benchmarks against
# PyTorch and JAX (MLPs), against PyTorch nested autograd (PINNs) and against PyTorch cuDNN (CNNs).
#   scripts/gpu_check.sh [BUILD_DIR] [LOG_DIR] [--no-bench]
# BUILD_DIR: a build with the CUDA backend (default build-cuda); LOG_DIR: where logs go
# (default $OUT or /tmp/stepgraph-gpu). Prints a short table last.
set -uo pipefail
BUILD=${1:-build-cuda}
LOG=${2:-${OUT:-/tmp/stepgraph-gpu}}
BENCH=1
[ "${3:-}" = "--no-bench" ] && BENCH=0
mkdir -p "$LOG"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# libcudnn.so.9 for the convolutions (loaded at run time): the toolkit's or python3's wheel.
CUDNN_LIB=$(bash scripts/cudnn_lib_dir.sh)
[ -n "$CUDNN_LIB" ] && export LD_LIBRARY_PATH="$CUDNN_LIB:$LD_LIBRARY_PATH"
echo "libcudnn.so.9: ${CUDNN_LIB:-not found}"
export NCCL_NVLS_ENABLE=0
SG="$BUILD/stepgraph"
declare -a rows

row() { rows+=("$(printf '%-34s %s' "$1" "$2")"); }

nvidia-smi -L | tee "$LOG/gpu.txt"

"$BUILD/tests/stepgraph_tests" > "$LOG/tests.log" 2>&1
rc=$?
row "all tests (gtest, GPU included)" "$( [ $rc -eq 0 ] && echo PASS || echo FAIL) $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]|tests ran' "$LOG/tests.log" | tr '\n' ' ')"

# The Python package built there (python3 3.12 with nanobind, scikit-build-core, torch, CuPy):
# PyTorch parity and DLPack tests run on the GPU.
SG_PY_VENV=none SG_PY_CUDA=1 bash scripts/test_python.sh > "$LOG/python.log" 2>&1
row "python tests (GPU parity, DLPack)" "exit $? $(tail -n 1 "$LOG/python.log" | cut -c1-100)"

"$SG" train --device cuda --json --out "$LOG/run_default" > "$LOG/train_default.log" 2>&1
row "train default on cuda" "$(tail -n 1 "$LOG/train_default.log" | cut -c1-160)"

"$SG" train configs/digits_cnn.json --device cuda --json > "$LOG/train_digits_cnn.log" 2>&1
row "train digits_cnn on cuda" "$(tail -n 1 "$LOG/train_digits_cnn.log" | cut -c1-160)"

# The transformer examples on the GPU (layer norm, embedding, attention kernels).
for cfg in configs/reverse_transformer.json configs/text_transformer.json; do
  "$SG" train "$cfg" --device cuda --json --out "$LOG/run_$(basename "$cfg" .json)" > "$LOG/train_$(basename "$cfg" .json).log" 2>&1
  row "train $(basename "$cfg") on cuda" "$(tail -n 1 "$LOG/train_$(basename "$cfg" .json).log" | cut -c1-160)"
done

# The physics-informed accuracy targets on the GPU (Poisson <= 1e-3, Burgers <= 2e-2; ~40 s).
for cfg in configs/poisson2d_accurate.json configs/burgers1d.json; do
  "$SG" train "$cfg" --device cuda --json --out "$LOG/run_$(basename "$cfg" .json)" > "$LOG/train_$(basename "$cfg" .json).log" 2>&1
  row "train $(basename "$cfg") on cuda" "$(tail -n 1 "$LOG/train_$(basename "$cfg" .json).log" | grep -o '"rel_l2_error":[^,]*' || echo FAILED)"
done

for cfg in configs/digits_mlp.json configs/digits_residual.json configs/synthetic_regression.json configs/digits_cnn.json \
           configs/reverse_transformer.json configs/text_transformer.json; do
  "$SG" train "$cfg" --mode verify --steps 50 > "$LOG/verify_$(basename "$cfg" .json).log" 2>&1
  row "verify $(basename "$cfg")" "$(tail -n 1 "$LOG/verify_$(basename "$cfg" .json).log" | cut -c1-160)"
done

for cfg in bench/configs/*.json bench/pinn_configs/*.json bench/cnn_configs/*.json; do
  "$SG" bench "$cfg" --steps 200 > "$LOG/bench_$(basename "$cfg" .json).log" 2>&1
  row "bench $(basename "$cfg")" "$(grep -E 'graph:' "$LOG/bench_$(basename "$cfg" .json).log" | tr -s ' ')"
done

if [ $BENCH -eq 1 ]; then
  cp bench/RESULTS.md "$LOG/RESULTS.md"
  PYTHONUNBUFFERED=1 python3 bench/bench_vs_torch.py --stepgraph "$SG" --results-md "$LOG/RESULTS.md" \
    > "$LOG/bench_vs_torch.log" 2>&1
  row "bench vs torch/jax" "exit $? (table in bench_vs_torch.log; RESULTS.md section in $LOG)"
  PYTHONUNBUFFERED=1 python3 bench/bench_pinn_vs_torch.py --stepgraph "$SG" --results-md "$LOG/RESULTS.md" \
    > "$LOG/bench_pinn.log" 2>&1
  row "bench PINN vs torch" "exit $? (table in bench_pinn.log; RESULTS.md section in $LOG)"
  PYTHONUNBUFFERED=1 python3 bench/bench_cnn_vs_torch.py --stepgraph "$SG" --results-md "$LOG/RESULTS.md" \
    > "$LOG/bench_cnn.log" 2>&1
  row "bench CNN vs torch" "exit $? (table in bench_cnn.log; RESULTS.md section in $LOG)"
fi

echo
echo "=== stepgraph GPU check ($(date -u +%Y-%m-%dT%H:%MZ)) ==="
printf '%s\n' "${rows[@]}"
[ $BENCH -eq 1 ] && tail -n 30 "$LOG/bench_vs_torch.log"
[ $BENCH -eq 1 ] && tail -n 25 "$LOG/bench_pinn.log"
[ $BENCH -eq 1 ] && tail -n 25 "$LOG/bench_cnn.log"
exit 0
