#!/bin/sh
# Session 43's third call: every GPU test (ctest's gpu_* entries and cmt_gpu_tests's GpuEngine and
# GpuTuner cases) at the tree with the ring faulted in by the copy threads (abc6015 and after).
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt; git log -1 --format=%H > $o/commit.txt 2>/dev/null
echo "built at $(( $(date +%s) - start )) s"
timeout $(( 580 - ($(date +%s) - start) )) ctest --test-dir $b -R "^gpu_|GpuEngine|GpuTuner" --output-on-failure > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(( $(date +%s) - start )) s"; grep -E "tests passed|Failed|\*\*\*|Passed|Skipped" $o/gpu-tests.txt | sed 's/ *Test *#/#/' | cut -c1-90
pack
