#!/bin/sh
# Session 36's calls 2 and 3, typed by hand on the machine device-call-1b.sh left warm (its
# build-gpu kept), with the device time left (about 5 minutes). Raw: call2/, call3/.
o=$OUT/r; mkdir -p $o/rec; b=build-gpu
# call 2: the GPU safety suite under auto; the offloaded inference recorded under staging, and
# `cmt trace show` of it.
cmake --build $b --target cmt_hot_safety_gpu > $o/build2.txt 2>&1
HOT_SAFETY_REGISTER=auto HOT_SAFETY_JOBS=2 timeout 120 tests/hot_safety.sh $b/cmt $b/tests/cmt_hot_safety_gpu 1500 2 gpu > $o/hot-safety-auto.txt 2>&1
CMT_CONFIGS_DIR= CMT_REGISTER=off timeout 60 $b/cmt run --record $o/rec/offload-off.tsv -- \
  python3 bench/workloads/offload.py --child hot 10 > $o/rec/offload-off.out 2>&1
$b/cmt trace show $o/rec/offload-off.tsv > $o/rec/offload-off.show.txt 2>&1
gzip $o/rec/offload-off.tsv
# call 3 (the first try lacked cmt-bench-replay): a 6-pass recording replayed as default, cmt
# and pinned, then cmt under auto and under hot.
cmake --build $b --target cmt-bench-replay > $o/build3.txt 2>&1
CMT_CONFIGS_DIR= CMT_REGISTER=off timeout 60 $b/cmt run --record $o/off.tsv -- \
  python3 bench/workloads/offload.py --child hot 6 > /dev/null 2>&1
CMT_CONFIGS_DIR= timeout 70 $b/cmt bench replay $o/off.tsv --rounds 3 > $o/replay-off.txt 2>&1
for m in auto hot; do
  CMT_CONFIGS_DIR= CMT_REGISTER=$m timeout 40 $b/cmt bench replay $o/off.tsv --rounds 3 --modes cmt > $o/replay-$m.txt 2>&1
done
rm -f $o/off.tsv
