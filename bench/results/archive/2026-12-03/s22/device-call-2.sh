#!/bin/sh
# session 22's second device call: build; the registered-buffer lab again (buffers on pages of
# their own now), plain and under cmt hot, and perf of the hot process where perf is there; the
# same buffer in a loop (cmt bench copy --threads 1, own stream, 64 KiB..256 MiB each way), hot
# and staged in their own processes beside default and pinned, 3 rounds; the Python safety suite
# (3 seeds x 2000); the C safety suite for the time left.
o=$OUT/r; mkdir -p $o
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; cd $OUT && tar czf r.tgz r; exit 1; }
date
timeout 40 build-gpu/cmt-lab-registered --reps 3000 > $o/lab-plain.txt 2>&1; cat $o/lab-plain.txt
CMT_REGISTER=hot CMT_CONFIGS_DIR= CMT_STATS=$o/lab-hot.stats.json timeout 40 build-gpu/cmt run -- \
  build-gpu/cmt-lab-registered --reps 3000 > $o/lab-hot.txt 2>&1; cat $o/lab-hot.txt
grep -o '"hot_buffers": {[^}]*}' $o/lab-hot.stats.json
if command -v perf > /dev/null; then
  CMT_REGISTER=hot CMT_CONFIGS_DIR= timeout 60 perf record -q -g -o $o/perf.data build-gpu/cmt run -- \
    build-gpu/cmt-lab-registered --sizes 64K --reps 20000 > $o/lab-perf.txt 2>&1
  perf report -i $o/perf.data --stdio --no-children --sort dso,sym 2>/dev/null | grep -v "^$" | head -150 > $o/perf.txt
  rm -f $o/perf.data; head -40 $o/perf.txt
else
  echo "no perf here"
fi
date
for mode in hot staged; do
  reg=off; [ $mode = hot ] && reg=hot
  CMT_REGISTER=$reg CMT_CONFIGS_DIR= CMT_STATS=$o/loop-$mode.stats.json timeout 70 build-gpu/cmt run -- \
    build-gpu/cmt bench copy --threads 1 --stream own --sizes 64K,256K,1M,16M,256M \
    --patterns h2d,d2h --seconds 0.2 --rounds 3 --json $o/loop-$mode.json > $o/loop-$mode.txt 2>&1
  grep -A4 "^[0-9]*[KM] x" $o/loop-$mode.txt | grep -v "^--" | grep "x 1\|cmt/"
done
date
cd $OUT && tar czf r.tgz r && cd - > /dev/null
CMT_CONFIGS_DIR= timeout 150 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py 2000 3 gpu \
  > $o/hot-safety-torch.txt 2>&1
grep -v DeprecationWarning $o/hot-safety-torch.txt | grep -v "pid = os.fork" | tail -12
date
cd $OUT && tar czf r.tgz r && cd - > /dev/null
CMT_CONFIGS_DIR= timeout 170 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu 10000 3 gpu \
  > $o/hot-safety-c.txt 2>&1
tail -8 $o/hot-safety-c.txt
date
cd $OUT && tar czf r.tgz r && rm -rf r
