#!/bin/sh
# NOT RUN: no device time was left when it was ready (a refused start after call 3 used 180 s);
# its loaders part is in s43/device-call-next.sh. What the file loaders' CPU per GB under cmt
# (0.34-1.06 s/GB against the default's 0.14-0.29 in call 1) buys: loaders.py --files-only with
# cmt's built-in settings, copy threads that never spin (CMT_SPIN_US=0) and four copy threads
# (CMT_THREADS=4), default beside, processes alternating, bytes checked.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
left=$(( 200 - ($(date +%s) - start) ))
CMT_CONFIGS_DIR= timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 2 --files-only \
  --mode spin0:CMT_SPIN_US=0 --mode threads4:CMT_THREADS=4 --deadline $(( left - 40 )) \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | tail -14
pack
