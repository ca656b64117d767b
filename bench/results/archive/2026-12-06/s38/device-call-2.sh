#!/bin/sh
# Session 38's second device call. Carry [".deps"]. Call 1's offload rounds moved pinned itself
# from 94.5 to 142.4 ms a pass within two minutes, so settings are compared here as ratios of
# passes run side by side in one process:
#  1. offload.py --same-process --register off: staged / pinned / default passes rotating in each
#     process, processes alternating the caller helping (built-in) and not (CMT_CALLER_HELPS=0);
#  2. loaders.py with --hf: default, cmt, cmt with CMT_CALLER_HELPS=0, rounds rotating.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
echo "built at $(( $(date +%s) - start )) s"
i=0
for h in 1 0 1 0 1 0; do
  [ $(( $(date +%s) - start )) -gt 260 ] && break
  i=$((i + 1))
  CMT_CONFIGS_DIR= timeout 100 python3 bench/workloads/offload.py $b/cmt --same-process --register off \
    --env CMT_CALLER_HELPS=$h --rounds 1 --passes 8 --json $o/same-$i-h$h.json > $o/same-$i-h$h.txt 2>&1
  echo "same $i helps=$h rc $?"; grep -E "staged against|^process" $o/same-$i-h$h.txt
  pack
done
echo "offload done at $(( $(date +%s) - start )) s"
left=$(( 570 - ($(date +%s) - start) ))
CMT_CONFIGS_DIR= timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --hf \
  --mode nohelp:CMT_CALLER_HELPS=0 --deadline $((left - 20)) --workdir /tmp/cmt-loaders \
  --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; tail -32 $o/loaders.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
