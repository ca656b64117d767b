#!/bin/sh
# Session 33's first device call (issue 32): session 32's changes that no GPU has run yet (the
# bridge b4ebfb2, the warm gate 67b575d, wake_ahead 7374cb7, loaders.py's rotating order).
#   build-gpu  this tree (4b2bb9e + this script)
#   build-head ce7200f (session 31's last commit: before any nap), .old-src/h: libraries, cmt and
#              its benchmarks (the concurrent comparison of call 2 uses them too)
#  1. the engine's GPU tests; 2. cmt tune --search instant --dry-run (its engine now runs with
#  wake-ahead off); 3. loaders.py, 4 rounds with --hf: default, cmt, head (CMT_LIBRARY), pinned.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; uname -a; nproc; grep MemTotal /proc/meminfo) > $o/gpu.txt 2>&1
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs cmt cmt-bench-copy cmt-bench-concurrent > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
for b in build build-head; do [ "$(cat $o/$b.rc)" = 0 ] || { tail -20 $o/$b.txt; pack; exit 1; }; done
echo "built in $(( $(date +%s) - start )) s"; cat $o/gpu.txt
timeout 120 build-gpu/tests/cmt_gpu_tests > $o/gpu-tests.txt 2>&1; echo "gpu tests rc $?"
grep -E "PASSED|FAILED" $o/gpu-tests.txt | tail -6
CMT_CONFIGS_DIR= timeout 60 build-gpu/cmt tune --search instant --dry-run > $o/tune.txt 2>&1; echo "tune rc $?"
tail -25 $o/tune.txt; pack
echo "at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout 330 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 4 --hf \
  --mode head:CMT_LIBRARY=$PWD/build-head/libcmt.so --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; grep -v "^child\|Writing" $o/loaders.txt | tail -40
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
