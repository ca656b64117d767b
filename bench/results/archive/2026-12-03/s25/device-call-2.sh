#!/bin/sh
# session 25's second device call (the session's last: its device time covers one more): offloaded
# inference, every mode (default, staged, hot, pinned), 3 rounds, statistics per process, one
# recorded hot run (its trace and `cmt trace show`); the same buffer in a loop, hot and staged
# (cmt bench copy, 3 rounds of 0.2 s windows), and call by call (cmt-lab-registered under cmt
# hot); then more seeds of the C safety suite (from seed 3: the first call ran 1 and 2) in the
# time left, toward 100,000 operations on this code. Results tarred after each step.
start=$(date +%s)
left() { echo $((start + 585 - $(date +%s))); }
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= CMT_STATS=$o/offload-%p.stats.json timeout 280 python3 bench/workloads/offload.py \
  build-gpu/cmt --rounds 3 --passes 5 --modes default,staged,hot,pinned --record $o/rec-offload \
  --json $o/offload.json > $o/offload.txt 2>&1
tail -9 $o/offload.txt
build-gpu/cmt trace show $o/rec-offload/offload-hot.tsv > $o/rec-offload/show.txt 2>&1
head -24 $o/rec-offload/show.txt
pack
for reg in hot off; do
  CMT_CONFIGS_DIR= CMT_REGISTER=$reg timeout 60 build-gpu/cmt run -- build-gpu/cmt bench copy --threads 1 \
    --stream own --sizes 64K,256K,1M,16M,256M --patterns h2d,d2h --seconds 0.2 --rounds 3 \
    --json $o/loop-$reg.json > $o/loop-$reg.txt 2>&1
  echo "register=$reg"; grep -E "x 1 threads|cmt/pinned" $o/loop-$reg.txt
done
CMT_REGISTER=hot timeout 60 build-gpu/cmt run -- build-gpu/cmt-lab-registered --reps 3000 > $o/registered-lab.txt 2>&1
cat $o/registered-lab.txt
pack
t=$(left); n=$(( (t - 20) / 50 )); echo "safety: $t s left, $n seeds"
[ $n -gt 0 ] && HOT_SAFETY_FIRST_SEED=3 timeout $((t - 3)) tests/hot_safety.sh build-gpu/cmt \
  build-gpu/tests/cmt_hot_safety_gpu 10000 $n gpu > $o/hot-safety.txt 2>&1
tail -8 $o/hot-safety.txt
date
pack
