#!/bin/sh
# session 25's second device call: offloaded inference, every mode (default, staged, hot, pinned),
# 3 rounds, statistics per process, and one recorded hot run (its trace and `cmt trace show`);
# then more seeds of the C safety suite (from seed 3: the first call ran 1 and 2) in the time
# left, toward 100,000 operations on this code. Results tarred after each step.
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
t=$(left); n=$(( (t - 30) / 50 )); echo "safety: $t s left, $n seeds"
[ $n -gt 0 ] && HOT_SAFETY_FIRST_SEED=3 timeout $((t - 5)) tests/hot_safety.sh build-gpu/cmt \
  build-gpu/tests/cmt_hot_safety_gpu 10000 $n gpu > $o/hot-safety.txt 2>&1
tail -8 $o/hot-safety.txt
date
pack
