#!/bin/sh
# Session 31's first device call (issue 32): a grown pool keeps awake only what its jobs use.
# This tree against HEAD (4a410b7, git archive in the ignored .old-src/, carried), built here.
#  1. the engine's GPU tests;
#  2. loaders.py (1/4/8 Python threads from a fresh mapping and resident, 1 ms gaps, pinned,
#     from_pretrained's second call): default, cmt (new), old (CMT_LIBRARY=build-old), 2 rounds,
#     then one recorded round of each cmt mode, cut into bursts by trace_windows.py.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-570} - ($(date +%s) - start) )); }
(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; uname -a; nproc; grep MemTotal /proc/meminfo) > $o/gpu.txt 2>&1
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake-old.txt 2>&1 &&
  cmake --build build-old > $o/build-old.txt 2>&1; echo $? > $o/build-old.rc) &
wait
[ "$(cat $o/build.rc)" = 0 ] && [ "$(cat $o/build-old.rc)" = 0 ] || { tail -20 $o/build.txt $o/build-old.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"; cat $o/gpu.txt
timeout 90 build-gpu/tests/cmt_gpu_tests > $o/gpu-tests.txt 2>&1; echo "gpu tests rc $?"
grep -E "PASSED|FAILED" $o/gpu-tests.txt | tail -5
pack
t=$(left); CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout $t python3 bench/workloads/loaders.py build-gpu/cmt --rounds 2 --hf \
  --mode old:CMT_LIBRARY=$PWD/build-old/libcmt.so --record $o/rec --json $o/loaders.json > $o/loaders.txt 2>&1
grep -v "^child\|Writing" $o/loaders.txt | tail -16
for f in $o/rec/*.tsv; do [ -f "$f" ] && python3 bench/lab/trace_windows.py $f > $f.windows.txt 2>&1 && gzip $f; done
tail -n +1 $o/rec/*.windows.txt 2>/dev/null | head -40
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
