#!/bin/sh
# Session 31's device call (issue 32): a grown pool keeps awake only what its jobs use (b3741bb).
# This tree against the commit before it (4a410b7, git archive in the ignored .old-src/, carried),
# both built here (machines were scarce this session: everything in one call).
#  1. loaders.py (1/4/8 Python threads from a fresh mapping and resident, 1 ms gaps, pinned,
#     from_pretrained's second call): default, cmt (new), old (CMT_LIBRARY=build-old), 2 rounds;
#  2. the concurrent benchmark, old against new, processes alternating, as time allows;
#  3. the engine's GPU tests.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-575} - ($(date +%s) - start) )); }
(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; uname -a; nproc; grep MemTotal /proc/meminfo) > $o/gpu.txt 2>&1
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake-old.txt 2>&1 &&
  cmake --build build-old > $o/build-old.txt 2>&1; echo $? > $o/build-old.rc) &
wait
[ "$(cat $o/build.rc)" = 0 ] && [ "$(cat $o/build-old.rc)" = 0 ] || { tail -20 $o/build.txt $o/build-old.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"; cat $o/gpu.txt
CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout 330 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 2 --hf \
  --mode old:CMT_LIBRARY=$PWD/build-old/libcmt.so --json $o/loaders.json > $o/loaders.txt 2>&1
grep -v "^child\|Writing" $o/loaders.txt | tail -16
pack
echo "at $(( $(date +%s) - start )) s"
t=$(( $(left) - 45 )); [ $t -gt 40 ] && timeout $t python3 bench/versus_concurrent.py build-old/cmt build-gpu/cmt --rounds 1 \
  --out $o/versus --json $o/versus.json > $o/versus.txt 2>&1
[ -f $o/versus.json ] || python3 bench/versus_concurrent.py --runs $o/versus --json $o/versus.json > $o/versus.txt 2>&1
tail -24 $o/versus.txt
pack
t=$(left); [ $t -gt 10 ] && timeout $t build-gpu/tests/cmt_gpu_tests > $o/gpu-tests.txt 2>&1; echo "gpu tests rc $?"
grep -E "PASSED|FAILED|OK \]" $o/gpu-tests.txt | tail -12
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
