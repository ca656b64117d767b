#!/bin/sh
# Session 50's first call (carry [".deps"]), on d5a22c9. T: seconds this call may take (default 480).
#  1. the host leg's GPU tests with the real driver: gpu_fread_states (new: cmt's fread against
#     glibc's in 15 stream states), gpu_host_copy, gpu_host_faults, gpu_preload_app_dynamic and
#     the GpuEngine tests;
#  2. loaders.py --files-only, default and cmt alternating, with the time left: the fread rows
#     after the fread hook now makes glibc's reads (whole blocks, the rest through the stream's
#     buffer; a 1 MiB or 16 MiB pinned buffer is read as before, one read).
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
el() { echo $(( $(date +%s) - start )); }
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(el) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
uname -r >> $o/gpu.txt; ldd --version | head -1 >> $o/gpu.txt
timeout 150 ctest --test-dir $b --output-on-failure \
  -R 'gpu_fread_states|gpu_host_copy|gpu_host_faults|gpu_preload_app_dynamic$|GpuEngine' > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(el) s"; grep -E "tests passed|Failed|\*\*\*|^ok |FAIL" $o/gpu-tests.txt | cut -c1-200; pack
export CMT_CONFIGS_DIR=
left=$(( ${T:-480} - $(el) ))
timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 6 --files-only --deadline $(( left - 20 )) \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(el) s"; cut -c1-200 $o/loaders.txt | tail -12
(cd $OUT && tar czf r.tgz r && rm -rf r)
