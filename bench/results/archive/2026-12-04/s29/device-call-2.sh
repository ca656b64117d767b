#!/bin/sh
# Session 29's second device call, on the fix for seed 6 (a chunk's free waits only for its own
# whole pages, chunks reported by their user bytes, release_wait 10 s and warned) and the hooks'
# cancellation hold before libcmt.so: the C safety suite 20 seeds x 10000, five processes at a
# time; the Python one 3 x 2000; the hot and host-leg GPU tests.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-570} - ($(date +%s) - start) )); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
HOT_SAFETY_JOBS=5 timeout 260 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu \
  10000 20 gpu > $o/hot-safety.txt 2>&1
grep -v "^ops 10000" $o/hot-safety.txt | tail -9
pack
echo "at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= timeout 120 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py 2000 3 gpu \
  > $o/hot-safety-torch.txt 2>&1
grep -v "DeprecationWarning\|pid = os.fork" $o/hot-safety-torch.txt | tail -6
pack
echo "at $(( $(date +%s) - start )) s"
t=$(left); [ $t -gt 30 ] && timeout $t ctest --test-dir build-gpu -R "gpu_host_faults|gpu_host_copy|gpu_structured_hot|gpu_driver_app|gpu_failidx|gpu_torch_dataloader" \
  --output-on-failure > $o/ctest.log 2>&1
grep -E "tests passed|\(Failed\)|Total Test time|Test +#" $o/ctest.log | tail -12
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
