#!/bin/sh
# Session 41, call 2. Carry [".deps"]. cmt-lab-fault-cost with its new pread mode (a piece read from
# the file instead of copied from a fresh shared mapping of it) and --ring (pieces into one shared
# buffer, as the staging ring takes them): is staging a file-backed source with pread worth building?
o=$OUT/r; mkdir -p $o
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt-lab-fault-cost > $o/build.txt 2>&1 || { tail -20 $o/build.txt; exit 1; }
grep -m1 "model name" /proc/cpuinfo; uname -r
for args in "--bytes 1G --piece 1M --threads 1,8" "--bytes 1G --piece 1M --threads 8 --ring 32M" \
            "--bytes 1G --piece 4M --threads 8 --ring 32M" "--bytes 64M --piece 1M --threads 1,8"; do
  echo "== $args"; $b/cmt-lab-fault-cost --reps 5 $args
done 2>&1 | tee $o/fault-cost.txt
