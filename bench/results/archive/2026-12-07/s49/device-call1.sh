#!/bin/sh
# Ran on f6b3b31 with register-later-not-kept.patch (beside it here) and bench/lab/register_beside_probe.cpp
# in the working tree, uncommitted; 07:50-07:58 UTC on nvidia-h100-x1 (H100 80GB HBM3, 580.159.04).
# Session 49's first call (carry [".deps"]). T: seconds this call may take (default 540).
#  1. the GPU tests of the host leg and the engine (not run since sessions 46-47 changed the read
#     path), and the hot-buffer tests (register_later is new, CPU-tested on the fake only);
#  2. cmt-lab-register-beside: whether a registration made by another thread holds up the
#     program's own copies and launches (issue 33: registering on cmt's release thread);
#  3. cmt-lab-copied-few under register off, hot, and hot with register_later, 2 rounds
#     alternating (hot's cost to buffers copied a few times, the reason it is opt-in);
#  4. session 48's probe of the mapped-loader dips (bench/lab/mapped_states.py, NOTES 95) with
#     the time left.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
el() { echo $(( $(date +%s) - start )); }
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(el) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
nproc > $o/cpu.txt; cat /sys/kernel/mm/transparent_hugepage/enabled >> $o/cpu.txt
timeout 110 ctest --test-dir $b --output-on-failure -R 'gpu_host_copy|gpu_host_faults|gpu_preload_app_dynamic$|GpuEngine' > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(el) s"; grep -E "tests passed|Failed|\*\*\*|hot_safety:" $o/gpu-tests.txt; pack
HOT_SAFETY_LATER=1 timeout 60 tests/hot_safety.sh $b/cmt $b/tests/cmt_hot_safety_gpu 3000 4 gpu > $o/hot-safety-later.txt 2>&1
echo "hot safety later rc $? at $(el) s"; tail -4 $o/hot-safety-later.txt
$b/cmt-lab-register-beside --ms 400 > $o/beside.txt 2>&1; echo "beside rc $? at $(el) s"; cat $o/beside.txt
export CMT_CONFIGS_DIR=
for r in 1 2; do for m in off hot later; do
  reg=$m; [ $m = later ] && reg=hot
  echo "== $m round $r" >> $o/copied-few.txt
  CMT_REGISTER=$reg CMT_REGISTER_LATER=$([ $m = later ] && echo 1 || echo 0) CMT_STATS=$o/copied-few-$m-$r.json \
    timeout 60 $b/cmt run -- $b/cmt-lab-copied-few --reps 9 --counts 1,2,3,5,10,30 >> $o/copied-few.txt 2>&1
  echo "copied-few $m $r rc $? at $(el) s"
done; done
cat $o/copied-few.txt | cut -c1-200; pack
left=$(( ${T:-540} - $(el) ))
timeout $left python3 bench/lab/mapped_states.py $b/cmt --rounds 14 --iters 3 --deadline $(( left - 30 )) \
  --record $o/rec --json $o/states.json > $o/states.txt 2>&1
echo "states rc $? at $(el) s"; cut -c1-300 $o/states.txt | tail -40
(cd $OUT && tar czf r.tgz r && rm -rf r)
