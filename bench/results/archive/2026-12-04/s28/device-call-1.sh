#!/bin/sh
# Session 28's first device call (issue 33 on the GPU after session 27's CPU-only work: a realloc
# of a registered chunk moved, release ABI 3; the free and realloc hooks' chunk_in_span). The C
# safety suite 10 x 10000, five processes at a time, and the Python one 3 x 2000; then every GPU
# test of device_check.sh's tests stage, the five session 27 did not run first.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-585} - ($(date +%s) - start) )); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
HOT_SAFETY_JOBS=5 timeout 200 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu \
  10000 10 gpu > $o/hot-safety.txt 2>&1
tail -7 $o/hot-safety.txt
CMT_CONFIGS_DIR= timeout 150 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py 2000 3 gpu \
  > $o/hot-safety-torch.txt 2>&1
grep -v "DeprecationWarning\|pid = os.fork" $o/hot-safety-torch.txt | tail -6
pack
echo "at $(( $(date +%s) - start )) s"
first="gpu_jax|gpu_tune|gpu_bench_copy|gpu_bench_replay|gpu_dlclose"
t=$(left); timeout $t ctest --test-dir build-gpu -R "$first" --output-on-failure > $o/ctest-first.log 2>&1
grep -E "tests passed|\(Failed\)|Test +#" $o/ctest-first.log
pack
t=$(left); [ $t -gt 30 ] && timeout $t ctest --test-dir build-gpu -R "gpu_|GpuEngine|GpuTuner|getproc|taken_once|dlsym" \
  -E "gpu_stress|gpu_hot_safety|$first" --output-on-failure > $o/ctest.log 2>&1
grep -E "tests passed|\(Failed\)|Total Test time|Test +#" $o/ctest.log | tail -26
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
