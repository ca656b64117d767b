#!/bin/sh
# Session 28's third device call: the GPU safety suite on the admission rule and the evictions
# taken back on cmt-release (seeds 1, 4, 7, 10 run with CMT_REGISTER_MAX=8M, so they evict; 4 and
# 10 also finish frees and evictions later): C 10 x 10000, five processes at a time, Python 3 x
# 2000; then gpu_structured_hot and the tests nearest the release hooks.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-400} - ($(date +%s) - start) )); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
HOT_SAFETY_JOBS=5 timeout 200 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu \
  10000 10 gpu > $o/hot-safety.txt 2>&1
tail -7 $o/hot-safety.txt
CMT_CONFIGS_DIR= timeout 120 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py 2000 3 gpu \
  > $o/hot-safety-torch.txt 2>&1
grep -v "DeprecationWarning\|pid = os.fork" $o/hot-safety-torch.txt | tail -6
pack
t=$(left); [ $t -gt 20 ] && timeout $t ctest --test-dir build-gpu -R "gpu_structured_hot|gpu_host_copy|gpu_driver_app" \
  --output-on-failure > $o/ctest.log 2>&1
grep -E "tests passed|\(Failed\)|Test +#" $o/ctest.log
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
