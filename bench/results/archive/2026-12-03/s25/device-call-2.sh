#!/bin/sh
# session 25's second device call: offloaded inference, every mode (default, staged, hot, pinned),
# 3 rounds, statistics per process, and one recorded hot run (its trace and `cmt trace show`);
# then the GPU tests the first call had no time for. Results tarred after each step.
start=$(date +%s)
left() { echo $((start + 565 - $(date +%s))); }
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= CMT_STATS=$o/offload-%p.stats.json timeout 300 python3 bench/workloads/offload.py \
  build-gpu/cmt --rounds 3 --passes 5 --modes default,staged,hot,pinned --record $o/rec-offload \
  --json $o/offload.json > $o/offload.txt 2>&1
tail -9 $o/offload.txt
build-gpu/cmt trace show $o/rec-offload/offload-hot.tsv > $o/rec-offload/show.txt 2>&1
head -30 $o/rec-offload/show.txt
pack
t=$(left); echo "gpu tests: $t s left"
[ $t -gt 40 ] && timeout $t ctest --test-dir build-gpu \
  -R "gpu_jax|gpu_tune|gpu_bench_copy|gpu_bench_replay|gpu_dlclose|gpu_torch_dataloader|gpu_host_copy|gpu_host_faults" \
  --output-on-failure > $o/ctest-gpu.log 2>&1
grep -E "Test +#|tests passed|\(Failed\)|Timeout" $o/ctest-gpu.log | tail -20
date
pack
