#!/bin/sh
# Session 33's fourth device call, asked of the H200 (the issue's machine) but run on the H100 still held:
# loaders.py with from_pretrained, default against cmt (this tree: the nap, the bridge and the
# warm gate of session 32 had run on no H200), then the DataLoader training loop.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
(nvidia-smi --query-gpu=name,driver_version --format=csv; uname -r; nproc) > $o/gpu.txt 2>&1; cat $o/gpu.txt
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt > $o/build.txt 2>&1) || { tail -20 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout 300 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 4 --hf --deadline 230 \
  --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; grep -v "^child\|Writing" $o/loaders.txt | tail -16; pack
echo "at $(( $(date +%s) - start )) s"
t=$(( 440 - ($(date +%s) - start) )); [ $t -gt 60 ] && CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout $t python3 bench/workloads/train_loop.py build-gpu/cmt --rounds 3 --deadline $(( t - 45 )) \
  --json $o/train.json > $o/train.txt 2>&1
echo "train rc $?"; tail -8 $o/train.txt; pack
echo "done at $(( $(date +%s) - start )) s"; date -u
