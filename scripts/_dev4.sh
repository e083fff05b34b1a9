export LD_LIBRARY_PATH="$(bash scripts/nccl_lib_dir.sh):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0
timeout 400 build-cuda/tests/stepgraph_tests > $OUT/t.txt 2>&1; echo "gtest rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure" $OUT/t.txt | head -30
SG=build-cuda/stepgraph
for c in reverse_transformer text_transformer; do echo "== $c"; timeout 200 $SG train configs/$c.json --device cuda --json --out /tmp/$c 2>&1 | tail -1 | cut -c1-400; timeout 100 $SG train configs/$c.json --mode verify --steps 50 2>&1 | tail -1; done
for c in reverse_transformer tiny_gpt; do echo "== bench $c"; timeout 100 $SG bench bench/cnn_configs/$c.json --steps 200 2>&1 | grep -E "graph:|eager:|error"; done
