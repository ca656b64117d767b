#!/bin/sh
# Session 31's third device call, inline on the same warm machine: from_pretrained's second call,
# 2 more rounds of default, new and old (the first call had 2).
mkdir -p $OUT/r
CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout 125 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 2 --hf-only \
  --mode old:CMT_LIBRARY=$PWD/build-old/libcmt.so --json $OUT/r/hf2.json > $OUT/r/hf2.txt 2>&1
