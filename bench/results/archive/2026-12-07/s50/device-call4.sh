#!/bin/sh
# Session 50's fourth call (carry [".deps"]), on ca1883a: the GPU tests, one at a time (as many as fit in the call); the CPU
# ones run in CI.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
el() { echo $(( $(date +%s) - start )); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; (cd $OUT && tar czf r.tgz r); exit 1; }
echo "built at $(el) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
# (the CPU tests run in CI; skipped here to save device time)

timeout $(( 420 - $(el) )) ctest --test-dir $b --output-on-failure -R '^gpu_|GpuEngine' > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(el) s"; grep -E "Test +#|tests passed|\*\*\*" $o/gpu-tests.txt | cut -c1-110
rm -f $o/build.txt $o/cmake.txt
(cd $OUT && tar czf r.tgz r && rm -rf r)
