#!/bin/sh
# Session 34's first device call.
#  1. GPU tests that have not run since session 33's fork fix: cmt_gpu_tests, gpu_torch_dataloader
#     (now forks a child under torch), gpu_torch, gpu_bench_copy (now asserts the CPU figure),
#     gpu_preload_app_dynamic.
#  2. Issue 33: H2D and D2H at once from reused buffers, hot against staged against pinned, with
#     the process's CPU per GB (cmt bench copy --threads, new cpu column); 2 and 8 threads.
#  3. Issue 33: offloaded inference in four processes (default, staged, hot, pinned) with CPU s/GB.
#  4. cmt-lab-fault-cost on the GPU machine (NOTES 76 was measured on the development VM), if time is left.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; uname -a; nproc; grep MemTotal /proc/meminfo) > $o/gpu.txt 2>&1
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"; cat $o/gpu.txt
timeout 120 build-gpu/tests/cmt_gpu_tests > $o/gpu-tests.txt 2>&1; echo "gpu tests rc $?"
grep -E "PASSED|FAILED" $o/gpu-tests.txt | tail -6
timeout 240 ctest --test-dir build-gpu --output-on-failure -R "^(gpu_torch_dataloader|gpu_torch|gpu_bench_copy|gpu_preload_app_dynamic)$" > $o/ctest.txt 2>&1; echo "ctest rc $?"
grep -E "Test +#|tests passed|Total Test" $o/ctest.txt; pack
echo "at $(( $(date +%s) - start )) s"
for reg in hot off; do
  CMT_CONFIGS_DIR= CMT_REGISTER=$reg timeout 80 build-gpu/cmt run -- build-gpu/cmt bench copy --threads 2 \
    --sizes 1M,16M,256M --patterns h2d,d2h,both --seconds 0.25 --rounds 4 --json $o/both2-$reg.json > $o/both2-$reg.txt 2>&1
  echo "threads 2 $reg rc $?"
  CMT_CONFIGS_DIR= CMT_REGISTER=$reg timeout 60 build-gpu/cmt run -- build-gpu/cmt bench copy --threads 8 \
    --sizes 16M,256M --patterns both --seconds 0.25 --rounds 4 --json $o/both8-$reg.json > $o/both8-$reg.txt 2>&1
  echo "threads 8 $reg rc $?"; pack
done
grep -E "x [0-9] threads|default|cmt |pinned|cmt/" $o/both2-hot.txt $o/both8-hot.txt | cut -c1-200
echo "at $(( $(date +%s) - start )) s"
left=$(( 540 - ($(date +%s) - start) ))
CMT_CONFIGS_DIR= CMT_STATS=$o/offload-%p.stats.json timeout $left python3 bench/workloads/offload.py build-gpu/cmt \
  --rounds 1 --passes 5 --modes default,staged,hot,pinned --json $o/offload.json > $o/offload.txt 2>&1
echo "offload rc $?"; tail -8 $o/offload.txt; pack
left=$(( 585 - ($(date +%s) - start) ))
timeout $left build-gpu/cmt-lab-fault-cost --reps 5 --threads 1,2,8 > $o/fault-cost.txt 2>&1; echo "fault-cost rc $?"
tail -30 $o/fault-cost.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
