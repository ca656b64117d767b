#!/bin/sh
# Session 32's first device call (issue 32). Three builds, made here in parallel:
#   build-gpu  this tree: threads nap through long gaps between jobs and wake ahead of the next
#   build-head ce7200f (session 31's last commit; libraries only), .old-src/h
#   build-old  4a410b7 (before session 31's pool fix; cmt and its benchmarks), .old-src/a
#  1. the engine's GPU tests (build-gpu);
#  2. loaders.py, 3 rounds: default, cmt (new), head (CMT_LIBRARY=build-head), pinned;
#  3. the concurrent benchmark's 2 x 1 GiB both-ways row, old against new, 3 rounds (the row
#     session 31 measured 0.94 once, in noisy minutes).
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-575} - ($(date +%s) - start) )); }
(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; uname -a; nproc; grep MemTotal /proc/meminfo) > $o/gpu.txt 2>&1
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
(cmake -S .old-src/a -B build-old $cfg > $o/cmake-old.txt 2>&1 && cmake --build build-old --target $libs cmt cmt-bench-copy cmt-bench-concurrent > $o/build-old.txt 2>&1; echo $? > $o/build-old.rc) &
wait
for b in build build-head build-old; do [ "$(cat $o/$b.rc)" = 0 ] || { tail -20 $o/$b.txt; pack; exit 1; }; done
echo "built in $(( $(date +%s) - start )) s"; cat $o/gpu.txt
timeout 120 build-gpu/tests/cmt_gpu_tests > $o/gpu-tests.txt 2>&1; echo "gpu tests rc $?"
grep -E "PASSED|FAILED" $o/gpu-tests.txt | tail -6
echo "at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout 230 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 3 \
  --mode head:CMT_LIBRARY=$PWD/build-head/libcmt.so --json $o/loaders.json > $o/loaders.txt 2>&1
grep -v "^child\|Writing" $o/loaders.txt | tail -30
pack
echo "at $(( $(date +%s) - start )) s"
t=$(( $(left) - 10 )); [ $t -gt 40 ] && timeout $t python3 bench/versus_concurrent.py build-old/cmt build-gpu/cmt --rounds 3 \
  --only 2x1G --out $o/versus --json $o/versus.json > $o/versus.txt 2>&1
[ -f $o/versus.json ] || python3 bench/versus_concurrent.py --runs $o/versus --json $o/versus.json > $o/versus.txt 2>&1
tail -6 $o/versus.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
