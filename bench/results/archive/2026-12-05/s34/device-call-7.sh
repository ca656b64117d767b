#!/bin/sh
# Session 34's seventh call: cmt-lab-registered under cmt hot with the modes rotating every copy
# (--block 1) and in blocks of 5000 copies (as cmt bench copy's loop runs one mode at a time):
# does running one mode back to back explain the loop's 0.85-0.90 at 64-256 KiB?
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 && cmake --build build-gpu --target cmt cmt-lab-registered > $o/build.txt 2>&1 || { tail $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for blk in 1 5000 1; do
  CMT_CONFIGS_DIR= CMT_REGISTER=hot timeout 60 build-gpu/cmt run -- build-gpu/cmt-lab-registered --sizes 64K,256K --reps 5000 --block $blk > $o/registered-block$blk.txt 2>&1
  echo "block $blk rc $?"; cat $o/registered-block$blk.txt
done
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
