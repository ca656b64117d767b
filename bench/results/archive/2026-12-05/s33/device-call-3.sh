#!/bin/sh
# Session 33's third device call (issue 32): a training loop fed by a DataLoader
# (bench/workloads/train_loop.py), default against cmt, alternating processes.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt > $o/build.txt 2>&1) || { tail -20 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
(df -h /dev/shm; python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)") > $o/env.txt 2>&1; cat $o/env.txt
CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout 420 python3 bench/workloads/train_loop.py build-gpu/cmt --rounds 4 --deadline 330 \
  --json $o/train.json > $o/train.txt 2>&1
echo "train rc $?"; tail -30 $o/train.txt; pack
echo "done at $(( $(date +%s) - start )) s"; date -u
