#!/bin/sh
# Session 39, call 3. Carry [".deps"]. Call 2 showed the offloaded inference's own work (a pass
# outside Tensor.to) ~8 ms longer under staging than beside pinned weights in the same process,
# and ~13 ms longer under CUDA's own pageable path. Two causes, told apart here:
#   H1 cmt's copy threads spinning between copies (CMT_SPIN_US=0: they sleep at once);
#   H2 staging's reads of the weights through the shared L3, evicting the program's working set
#      (CMT_LAB_NTA_LOADS=1: a lab build's staging reads its source behind PREFETCHNTA).
# Staged / pinned / default in each process (--register off), the variants alternating; then hot
# with more passes, and cmt-bench-copy with and without the NTA reads.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release cmt-bench-copy > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
echo "built at $(( $(date +%s) - start )) s"
for v in base spin0 nta base spin0 nta; do
  [ $(( $(date +%s) - start )) -gt 330 ] && break
  case $v in base) env=CMT_SPIN_US=1000;; spin0) env=CMT_SPIN_US=0;; nta) env=CMT_LAB_NTA_LOADS=1;; esac
  CMT_CONFIGS_DIR= timeout 100 python3 bench/workloads/offload.py $b/cmt --same-process --register off \
    --env $env --rounds 1 --passes 10 --json $o/same-$v-$(date +%s).json > $o/same-$v.txt 2>&1
  echo "$v rc $?"; cat $o/same-$v.txt >> $o/same.txt; grep -A9 "^forward" $o/same-$v.txt | grep -v "^forward"
  pack
done
CMT_CONFIGS_DIR= timeout 100 python3 bench/workloads/offload.py $b/cmt --same-process --register hot \
  --rounds 1 --passes 16 --json $o/same-hot16.json > $o/same-hot16.txt 2>&1
echo "hot16 rc $?"; grep -A9 "^forward" $o/same-hot16.txt | grep -v "^forward"
pack
left=$(( 570 - ($(date +%s) - start) ))
[ $left -gt 60 ] && CMT_CONFIGS_DIR= timeout $left python3 bench/compare.py $b/cmt-bench-copy --sizes 4M,16M,64M \
  --reps 5 --rounds 3 base:CMT_LAB_NTA_LOADS=0 nta:CMT_LAB_NTA_LOADS=1 --json $o/compare.json > $o/compare.txt 2>&1
tail -10 $o/compare.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
