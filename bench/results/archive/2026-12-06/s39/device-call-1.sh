#!/bin/sh
# Session 39, call 1 (written as device-call-next.sh by session 38). Carry [".deps"].
# NOTES 82's next step. The staging rate against threads, where offload's staged passes lose
# their time inside the copy calls (39 GB/s of staging on the built-in 8 threads):
#  1. cmt-bench-cpu (the CPU side alone) on 1-14 threads;
#  2. offload.py --same-process --register off with CMT_THREADS=8, 12, 14 in alternating processes
#     (staged against pinned, pass by pass, in each);
#  3. cmt-bench-copy, 8 threads against 12, 4-64 MiB.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release cmt-bench-copy \
    cmt-bench-cpu > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
echo "built at $(( $(date +%s) - start )) s"
timeout 90 $b/cmt-bench-cpu --threads 1,4,8,12,14 --reps 3 > $o/cpu.txt 2>&1; cat $o/cpu.txt
pack
for n in 8 12 14 8 12 14; do
  [ $(( $(date +%s) - start )) -gt 400 ] && break
  CMT_CONFIGS_DIR= timeout 90 python3 bench/workloads/offload.py $b/cmt --same-process --register off \
    --env CMT_THREADS=$n --rounds 1 --passes 8 --json $o/same-t$n-$(date +%s).json >> $o/same.txt 2>&1
  echo "threads $n rc $?"; grep -E "staged against pinned, pass by pass: median" $o/same.txt | tail -1
  pack
done
left=$(( 570 - ($(date +%s) - start) ))
[ $left -gt 60 ] && CMT_CONFIGS_DIR= timeout $left python3 bench/compare.py $b/cmt-bench-copy --sizes 4M,16M,64M \
  --reps 5 --rounds 3 t8:CMT_THREADS=8 t12:CMT_THREADS=12 --json $o/compare.json > $o/compare.txt 2>&1
tail -10 $o/compare.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
