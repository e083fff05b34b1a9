export LD_LIBRARY_PATH="$(bash scripts/nccl_lib_dir.sh):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0
timeout 200 build-cuda/tests/stepgraph_tests > $OUT/t.txt 2>&1; echo "gtest rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/t.txt | head -10
cp bench/RESULTS.md $OUT/RESULTS.md
PYTHONUNBUFFERED=1 timeout 330 python3 bench/bench_cnn_vs_torch.py --stepgraph build-cuda/stepgraph --results-md $OUT/RESULTS.md > $OUT/bench_cnn.log 2>&1; echo "bench rc $?"
tail -n 22 $OUT/bench_cnn.log | cut -c1-600
