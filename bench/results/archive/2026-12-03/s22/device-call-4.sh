#!/bin/sh
# session 22's fourth device call: build; offloaded inference (accelerate cpu_offload), default /
# staged / hot / pinned, 1 round, with a weight that starts on a registered neighbour's page now
# taken by the hot path (the third call's run had q/k/v/o going hot every other pass), one
# recorded hot run; then the Python safety suite on this code for the time left.
o=$OUT/r; mkdir -p $o
# The library and cmt only (no tests, no benchmarks): the budget left is short.
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMT_BUILD_TESTS=OFF -DCMT_BUILD_BENCH=OFF \
  -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; cd $OUT && tar czf r.tgz r; exit 1; }
date
CMT_CONFIGS_DIR= timeout 150 python3 bench/workloads/offload.py build-gpu/cmt --rounds 1 --passes 5 \
  --record $o/rec --json $o/offload.json > $o/offload.txt 2>&1
tail -8 $o/offload.txt
[ -f $o/rec/offload-hot.tsv ] && build-gpu/cmt trace show $o/rec/offload-hot.tsv > $o/rec/offload-hot.show.txt 2>&1
head -6 $o/rec/offload-hot.show.txt
date
cd $OUT && tar czf r.tgz r && cd - > /dev/null
CMT_CONFIGS_DIR= timeout 40 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py 800 1 gpu \
  > $o/hot-safety-torch.txt 2>&1
grep -v DeprecationWarning $o/hot-safety-torch.txt | grep -v "pid = os.fork" | tail -8
date
cd $OUT && tar czf r.tgz r && rm -rf r
