#!/bin/sh
# Session 29's first device call: why the GPU safety suite's seed 6 fails on some instances (a
# cuMemcpy3DAsync left to CUDA returning CUDA_ERROR_INVALID_VALUE). First which host bytes CUDA
# looks at in a 2D or 3D copy (cmt-lab-structured-span: one page registered at a time around the
# rows); then the C suite, ten seeds five at a time, the app now printing a failed copy's rows;
# then seed 6 alone with cmt's debug log beside four other seeds; then the GPU tests not run
# on the H200 since session 27.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-570} - ($(date +%s) - start) )); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
build-gpu/cmt-lab-structured-span > $o/span-probe.txt 2>&1; cat $o/span-probe.txt
pack
HOT_SAFETY_JOBS=5 timeout 170 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu \
  10000 10 gpu > $o/hot-safety.txt 2>&1
grep -v "^ops 10000" $o/hot-safety.txt | tail -9
pack
echo "at $(( $(date +%s) - start )) s"
# Seed 6 as hot_safety.sh runs it (even: frees finished later; default bound), debug log.
HOT_SAFETY_JOBS=4 timeout 150 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu \
  10000 4 gpu > $o/hot-safety-beside.txt 2>&1 &
CMT_THRESHOLD=64K CMT_D2H_THRESHOLD=64K CMT_WARM_THRESHOLD=64K CMT_D2H_WARM_THRESHOLD=64K \
  CMT_REGISTER=hot CMT_REGISTER_MAX=0 CMT_REGISTER_FREE_LATER=1 CMT_LOG=debug \
  timeout 150 build-gpu/cmt run -- build-gpu/tests/cmt_hot_safety_gpu 10000 6 > $o/seed6.out 2> $o/seed6.err
echo "seed 6 alone: exit $?"; cat $o/seed6.out; grep -v "^\[" $o/seed6.err | head; grep -c "" $o/seed6.err
wait
gzip -f $o/seed6.err
tail -3 $o/hot-safety-beside.txt
pack
echo "at $(( $(date +%s) - start )) s"
t=$(left); [ $t -gt 30 ] && timeout $t ctest --test-dir build-gpu -R "gpu_cupy|gpu_torch_dataloader|gpu_host_faults|gpu_structured_hot|gpu_host_copy|gpu_driver_app|GpuEngine" \
  --output-on-failure > $o/ctest.log 2>&1
grep -E "tests passed|\(Failed\)|Total Test time|Test +#" $o/ctest.log | tail -20
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
