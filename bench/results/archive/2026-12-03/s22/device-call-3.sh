#!/bin/sh
# session 22's third device call: build; the C safety suite, 7 seeds x 10000 operations (with the
# second call's 3 x 10000 and the Python suite's 3 x 2000 on the same code: over 100,000); then
# offloaded inference (accelerate cpu_offload), default / staged / hot / pinned, with neighbours
# sharing a page now registered, one recorded hot run.
o=$OUT/r; mkdir -p $o
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; cd $OUT && tar czf r.tgz r; exit 1; }
date
CMT_CONFIGS_DIR= timeout 300 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu 10000 7 gpu \
  > $o/hot-safety-c.txt 2>&1
tail -9 $o/hot-safety-c.txt
date
cd $OUT && tar czf r.tgz r && cd - > /dev/null
CMT_CONFIGS_DIR= timeout 180 python3 bench/workloads/offload.py build-gpu/cmt --rounds 1 --passes 5 \
  --record $o/rec --json $o/offload.json > $o/offload.txt 2>&1
tail -8 $o/offload.txt
[ -f $o/rec/offload-hot.tsv ] && build-gpu/cmt trace show $o/rec/offload-hot.tsv > $o/rec/offload-hot.show.txt 2>&1
head -6 $o/rec/offload-hot.show.txt
date
cd $OUT && tar czf r.tgz r && rm -rf r
