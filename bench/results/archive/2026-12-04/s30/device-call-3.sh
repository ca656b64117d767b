#!/bin/sh
# Session 30's third device call, on 94e5cbd: the Python safety suite with its copies under the
# threshold (gpu_hot_safety_torch), then the GPU tests that load the engine most after the ring
# cursor (5eaa4e3): gpu_stress, GpuEngine.*, gpu_bench_copy, gpu_torch, and the rest as time allows.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-480} - ($(date +%s) - start) )); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= timeout 150 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py 2000 3 gpu \
  > $o/hot-safety-torch.txt 2>&1
grep -v "DeprecationWarning\|pid = os.fork" $o/hot-safety-torch.txt | tail -8
pack
echo "at $(( $(date +%s) - start )) s"
t=$(left); timeout $t ctest --test-dir build-gpu -R "gpu_stress|GpuEngine|gpu_bench_copy|gpu_torch$" \
  --output-on-failure > $o/ctest-first.log 2>&1
grep -E "tests passed|\(Failed\)|Test +#" $o/ctest-first.log | tail -16
pack
echo "at $(( $(date +%s) - start )) s"
t=$(left); [ $t -gt 30 ] && timeout $t ctest --test-dir build-gpu \
  -R "gpu_bench_replay|gpu_failidx|gpu_driver_app|gpu_structured_hot|gpu_host_copy|gpu_host_faults|gpu_torch_dataloader|gpu_hot_safety$" \
  --output-on-failure > $o/ctest.log 2>&1
grep -E "tests passed|\(Failed\)|Total Test time|Test +#" $o/ctest.log | tail -12
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
