#!/bin/sh
# Session 31's second device call, typed inline on the machine still warm from the first (whose
# two rounds were too noisy to rank the builds: pinned-1 itself 28-42 GB/s), so build-gpu and
# build-old are the first call's: loaders.py's copies alone, 5 rounds, new against old.
mkdir -p $OUT/r; cmake --build build-gpu > /dev/null 2>&1
CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout 290 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 5 \
  --mode old:CMT_LIBRARY=$PWD/build-old/libcmt.so --json $OUT/r/loaders5.json > $OUT/r/loaders5.txt 2>&1
