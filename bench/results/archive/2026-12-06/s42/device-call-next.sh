#!/bin/sh
# Written in session 42 (its device budget had ended); run as session 43's first call (an H100, results in archive/2026-12-06/s43/call1/). Carry [".deps"].
# (1) NOTES 88: a process's first 125 MiB copy each way with the ring faulted in by the copy
#     threads (abc6015) against the building thread alone (ring-fault-one-thread-lab.patch,
#     CMT_LAB_RING_FAULT_ONE_THREAD=1) and default, processes taking turns, with `cmt run -v`'s
#     "lane ready" lines; (2) cmt-lab-ring-build with its huge+pop method (not yet run);
# (3) the GPU tests session 42's filters left out (cmt_gpu_tests: GpuEngine.*, GpuTuner.*;
#     gpu_torch_dataloader); (4) loaders.py --hf --files in the time left.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
p=bench/results/archive/2026-12-06/s42/ring-fault-one-thread-lab.patch
{ git apply $p 2>/dev/null || patch -p1 < $p; } > $o/patch.txt 2>&1 || { cat $o/patch.txt; exit 1; }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
echo "built at $(( $(date +%s) - start )) s"
cp bench/results/archive/2026-12-06/s42/call1/first.py $o/first.py
for i in 1 2 3 4; do
  CMT_CONFIGS_DIR= $b/cmt run -v -- python3 $o/first.py threads > $o/first-threads-$i.txt 2>&1
  CMT_CONFIGS_DIR= CMT_LAB_RING_FAULT_ONE_THREAD=1 $b/cmt run -v -- python3 $o/first.py one > $o/first-one-$i.txt 2>&1
  python3 $o/first.py default > $o/first-default-$i.txt 2>&1
  grep -h "first h2d" $o/first-*-$i.txt; grep -ho "built in.*" $o/first-threads-$i.txt $o/first-one-$i.txt
done
timeout 60 $b/cmt-lab-ring-build --sizes 24M,48M --reps 5 | tee $o/ring-build.txt
pack
timeout 150 ctest --test-dir $b -R "GpuEngine|GpuTuner|gpu_torch_dataloader" --output-on-failure > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(( $(date +%s) - start )) s"; grep -E "tests passed|Failed|\*\*\*" $o/gpu-tests.txt | head
pack
left=$(( 570 - ($(date +%s) - start) ))
[ $left -gt 200 ] && CMT_CONFIGS_DIR= timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --hf --files \
  --deadline $(( left - 130 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; grep -v "^child" $o/loaders.txt | tail -24
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
