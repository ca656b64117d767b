#!/bin/sh
# Session 38's fourth device call (short: the device budget's rest). Carry [".deps"]. Call 3's
# same-process offload under register = auto staged through all 10 passes (CPU 1.14 s a pass, as
# staged), where session 36's auto, a process of its own, registered the weights within the first
# passes: the same child recorded (trace version 5) with CMT_STATS, to see what auto registered
# and when.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= CMT_REGISTER=auto CMT_STATS=$o/stats-auto.json timeout 100 $b/cmt run --record $o/same-auto.tsv -- \
  python3 bench/workloads/offload.py --child-same 8 auto > $o/same-auto.out 2>&1
echo "rc $?"; tail -c 600 $o/same-auto.out
$b/cmt trace show $o/same-auto.tsv > $o/same-auto.show.txt 2>&1
sed -n '/on their streams/,$p' $o/same-auto.show.txt
python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['hot_buffers'])" $o/stats-auto.json
gzip $o/same-auto.tsv
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
