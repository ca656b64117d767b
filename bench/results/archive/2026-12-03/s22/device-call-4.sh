#!/bin/sh
# session 22's fourth device call, with about 250 s of device time left: the library and cmt only
# (no tests, no benchmarks); offloaded inference (accelerate cpu_offload), hot and pinned first,
# then staged and default, one process each, each printed as it ends, with a weight that starts
# on a registered neighbour's page now taken by the hot path (e44530e: the third call's run had
# q/k/v/o going hot every other pass).
o=$OUT/r; mkdir -p $o
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMT_BUILD_TESTS=OFF -DCMT_BUILD_BENCH=OFF \
  -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; cd $OUT && tar czf r.tgz r; exit 1; }
date
CMT_CONFIGS_DIR= CMT_STATS=$o/offload-%p.stats.json timeout 150 python3 bench/workloads/offload.py build-gpu/cmt --rounds 1 \
  --passes 5 --modes hot,pinned,staged,default --json $o/offload.json 2>&1 | tee $o/offload.txt
date
cd $OUT && tar czf r.tgz r && rm -rf r
