#!/bin/sh
# Session 37's second device call, trimmed to the device budget that refused starts left
# (device-call-2.sh was never run: every start was refused). Carry [".deps"].
#  1. the CPU's topology, and cmt-lab-spin-cost (spinning threads beside a thread's work, the work
#     right after 8 threads streamed 24 MiB, how late naps end);
#  2. offloaded inference staged, pinned, staged with threads that never spin (CMT_SPIN_US=0) and
#     that spin 300 us (gaps past that napped through, waking ahead of the next copy): call 1's
#     traces say the program's own work between copies took a third longer under staging;
#  3. call 1's staged trace over its last six passes, its CPU gaps as work of a fixed size (the
#     replay's new default) and as busy loops.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release cmt-bench-replay \
    cmt-lab-spin-cost > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
lscpu > $o/lscpu.txt; grep -E "^CPU\(s\)|Thread|Core|Socket|Model name|NUMA|L3" $o/lscpu.txt
echo "built at $(( $(date +%s) - start )) s"
timeout 40 $b/cmt-lab-spin-cost --spinners 4,8,14 --reps 300 > $o/spin-cost.txt 2>&1; cat $o/spin-cost.txt
pack
CMT_CONFIGS_DIR= timeout 130 python3 bench/workloads/offload.py $b/cmt --rounds 1 --passes 20 \
  --modes staged,pinned --mode spin0:staged:CMT_SPIN_US=0 --mode spin300:staged:CMT_SPIN_US=300 \
  --json $o/offload.json > $o/offload.txt 2>&1
echo "offload rc $?"; tail -6 $o/offload.txt
pack
echo "offload done at $(( $(date +%s) - start )) s"
t=/tmp/offload-off.tsv
gunzip -c bench/results/archive/2026-12-06/s37/call1/rec/offload-off.tsv.gz > $t
CMT_CONFIGS_DIR= timeout 40 $b/cmt bench replay $t --window 1.344:2.3 --rounds 3 --modes cmt,pinned > $o/replay-window.txt 2>&1
tail -3 $o/replay-window.txt
CMT_CONFIGS_DIR= timeout 30 $b/cmt bench replay $t --window 1.344:2.3 --rounds 3 --modes cmt,pinned --gap-work time > $o/replay-window-time.txt 2>&1
tail -2 $o/replay-window-time.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
