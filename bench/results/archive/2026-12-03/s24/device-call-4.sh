#!/bin/sh
# session 24's fourth device call (the last 5 minutes of the session's device time): where the
# hot offload pass loses to pinned. Pinned weights under cmt hot ran 87 ms a pass (pinned 98),
# so cmt's hooks cost nothing there; the hot pass's copies take 44 ms, but the time between them
# grows. Each thread's CPU by name (cmt-copy: cmt's threads) over the timed passes, for hot,
# hot with the copy threads never spinning (CMT_SPIN_US=0), and pinned. Library and cmt only.
o=$OUT/r; mkdir -p $o
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMT_BUILD_TESTS=OFF -DCMT_BUILD_BENCH=OFF \
  -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; cd $OUT && tar czf r.tgz r; exit 1; }
date
CMT_CONFIGS_DIR= timeout 150 python3 bench/workloads/offload.py build-gpu/cmt --rounds 1 --passes 5 \
  --modes hot,pinned --mode hot-spin0:hot:CMT_SPIN_US=0 --json $o/offload.json > $o/offload.txt 2>&1
cat $o/offload.txt
date
(cd $OUT && tar czf r.tgz r)
