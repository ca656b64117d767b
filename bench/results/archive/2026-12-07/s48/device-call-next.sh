#!/bin/sh
# NOT RUN: session 48's call 3 could not start (12 starts refused, about 04:53-05:56 UTC, until too
# little device time was left); the next session's first call (carry [".deps"]). The committed
# build; bench/lab/mapped_states.py, default and cmt processes alternating, each running both
# mapped loaders, a copy from pinned memory and two CPU bandwidth probes 3 times in turn, with
# what the scheduler says of each load (run, runnable wait, stolen time); cmt's processes recorded
# (CMT_RECORD, CMT_STATS), so that a slow process can be told from a slow machine (lab/NOTES.md
# 95); before it, the GPU tests of the host leg and the engine (not run since sessions 46 and 47
# changed the read path; TESTS=0 leaves them out). T: seconds this call may take.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
nproc > $o/cpu.txt; cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag >> $o/cpu.txt
[ "${TESTS:-1}" = 0 ] || timeout 100 ctest --test-dir $b --output-on-failure -R 'gpu_host_copy|gpu_host_faults|gpu_preload_app_dynamic$|GpuEngine' > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(( $(date +%s) - start )) s"; grep -E "tests passed|Failed|\*\*\*" $o/gpu-tests.txt; pack
export CMT_CONFIGS_DIR=
left=$(( ${T:-540} - ($(date +%s) - start) ))
timeout $left python3 bench/lab/mapped_states.py $b/cmt --rounds 14 --iters 3 --deadline $(( left - 40 )) \
  --record $o/rec --json $o/states.json > $o/states.txt 2>&1
echo "states rc $? at $(( $(date +%s) - start )) s"; cat $o/states.txt | cut -c1-400
pack
