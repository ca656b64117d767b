#!/bin/sh
# Session 38's first device call (issue 32: what slows a program's own work after a staged copy;
# NOTES 81). Carry [".deps"].
#  1. cmt-lab-spin-cost with its new variants: the work's first run and a second at once after
#     the copy (a cold cache costs the first only), the copy made afresh / by a pool / by a pool
#     and the caller (as cmt's caller helps), the copiers and the work pinned apart, sleeps of
#     200 us and 2 ms, and the work beside one streaming thread on each other CPU;
#  2. offloaded inference staged with the caller helping (the built-in default) and not
#     (CMT_CALLER_HELPS=0: the copy threads stage every byte), against pinned;
#  3. cmt-bench-copy, caller helping or not, by size.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release cmt-bench-copy \
    cmt-lab-spin-cost > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
lscpu > $o/lscpu.txt; grep -E "^CPU\(s\)|Thread|Model name|L2|L3" $o/lscpu.txt
echo "built at $(( $(date +%s) - start )) s"
timeout 100 $b/cmt-lab-spin-cost --spinners 8 --reps 200 > $o/spin-cost.txt 2>&1; cat $o/spin-cost.txt
pack
echo "lab done at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= timeout 200 python3 bench/workloads/offload.py $b/cmt --rounds 1 --passes 12 \
  --modes staged,pinned --mode nohelp:staged:CMT_CALLER_HELPS=0 --json $o/offload.json > $o/offload.txt 2>&1
echo "offload rc $?"; tail -8 $o/offload.txt
pack
echo "offload done at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= timeout 110 python3 bench/compare.py $b/cmt-bench-copy --sizes 1M,4M,16M,64M,256M --reps 5 \
  --rounds 3 help:CMT_CALLER_HELPS=1 nohelp:CMT_CALLER_HELPS=0 --json $o/compare.json > $o/compare.txt 2>&1
echo "compare rc $?"; cat $o/compare.txt | tail -30
pack
left=$(( 560 - ($(date +%s) - start) ))
if [ $left -gt 80 ]; then
  CMT_CONFIGS_DIR= timeout $left python3 bench/workloads/offload.py $b/cmt --rounds 1 --passes 12 \
    --modes pinned,staged --mode nohelp:staged:CMT_CALLER_HELPS=0 --json $o/offload2.json > $o/offload2.txt 2>&1
  echo "offload2 rc $?"; tail -8 $o/offload2.txt
fi
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
