#!/bin/sh
# Session 34's sixth call: cmt-lab-registered under cmt hot with the mean and the 99th percentile
# beside the median (call 5: hot at 0.96-0.98 of pinned by medians, 0.85-0.90 in cmt bench copy's
# loops at 64-256 KiB): is the loop's loss a slow tail of the hot path?
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 && cmake --build build-gpu --target cmt cmt-lab-registered cmt-bench-concurrent cmt-bench-copy > $o/build.txt 2>&1 || { tail $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for off in 0 16; do
  CMT_CONFIGS_DIR= CMT_REGISTER=hot timeout 100 build-gpu/cmt run -- build-gpu/cmt-lab-registered --sizes 64K,256K --reps 5000 --offset $off > $o/registered-$off.txt 2>&1
  echo "offset $off rc $?"; cat $o/registered-$off.txt
done
pack
CMT_CONFIGS_DIR= CMT_REGISTER=hot timeout 60 build-gpu/cmt run -- build-gpu/cmt bench copy --threads 1 --stream own \
  --sizes 64K,256K --patterns h2d,d2h --seconds 0.2 --rounds 5 > $o/hot-small.txt 2>&1
echo "bench rc $?"; grep -E "threads, |cmt/" $o/hot-small.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
