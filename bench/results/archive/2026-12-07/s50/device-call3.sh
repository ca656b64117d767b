#!/bin/sh
# Session 50's third call (carry [".deps"]), on 1912b5c + gpu_stress.cpp's differential now
# comparing cudaGetLastError() after each copy call (uncommitted at the time): gpu_stress.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
el() { echo $(( $(date +%s) - start )); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; (cd $OUT && tar czf r.tgz r); exit 1; }
echo "built at $(el) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
timeout 300 ctest --test-dir $b -V -R '^gpu_stress$' > $o/gpu-tests.txt 2>&1
echo "gpu_stress rc $? at $(el) s"; grep -E "tests passed|Failed|\*\*\*|FAIL|differential|ok:|took" $o/gpu-tests.txt | cut -c1-220
rm -f $o/build.txt $o/cmake.txt
(cd $OUT && tar czf r.tgz r && rm -rf r)
