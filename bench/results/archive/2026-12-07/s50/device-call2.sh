#!/bin/sh
# Session 50's second call (carry [".deps"]), on 3191606: the host leg's GPU tests with the real
# driver after the reads became cancellation points (host_faults' new cancel-read) and counts
# past the top of the address space went to libc (host_copy's past_the_top_wrong).
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
el() { echo $(( $(date +%s) - start )); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; (cd $OUT && tar czf r.tgz r); exit 1; }
echo "built at $(el) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
timeout 240 ctest --test-dir $b -V \
  -R 'gpu_fread_states|gpu_host_copy|gpu_host_faults|gpu_preload_app_dynamic$|GpuEngine' > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(el) s"; grep -E "tests passed|Failed|\*\*\*|: ok|: FAIL|ok   |FAIL " $o/gpu-tests.txt | cut -c1-220
rm -f $o/build.txt $o/cmake.txt
(cd $OUT && tar czf r.tgz r && rm -rf r)
