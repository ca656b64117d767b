#!/bin/sh
# session 24's third device call: build; hotsafe (gpu_structured_hot, the C safety suite 2 x 10000
# now with CUDA's answers about each copied buffer checked, cmt-lab-pointer-attrs with the new
# pointer-query hooks); the host leg's GPU tests (gpu_host_copy, gpu_host_faults); offloaded
# inference hot / pinned / pinned weights under cmt hot (what cmt costs a pass besides its
# copies) / staged, one round; then the file loaders (default / cmt / CMT_HOST_READS=all), one
# round, in the time left. Results tarred after each step.
start=$(date +%s)
left() { echo $((start + 440 - $(date +%s))); }
o=$OUT/r; mkdir -p $o
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; cd $OUT && tar czf r.tgz r; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
bench/device_check.sh build-gpu $o hotsafe
(cd $OUT && tar czf r.tgz r)
timeout 120 ctest --test-dir build-gpu -R "gpu_host_copy|gpu_host_faults" --output-on-failure > $o/ctest-host.log 2>&1
grep -E "Test +#|tests passed|\(Failed\)" $o/ctest-host.log
(cd $OUT && tar czf r.tgz r)
CMT_CONFIGS_DIR= CMT_STATS=$o/offload-%p.stats.json timeout 170 python3 bench/workloads/offload.py build-gpu/cmt \
  --rounds 1 --passes 5 --modes hot,pinned,staged --mode pinned-hot:pinned:CMT_DISABLE=0,CMT_REGISTER=hot \
  --json $o/offload.json > $o/offload.txt 2>&1
tail -9 $o/offload.txt
(cd $OUT && tar czf r.tgz r)
t=$(left); echo "files: $t s left"
[ $t -gt 60 ] && timeout $t python3 bench/workloads/loaders.py build-gpu/cmt --rounds 1 --files-only \
  --mode reads:CMT_HOST_READS=all --workdir /tmp/cmt-loaders --json $o/files.json > $o/files.txt 2>&1
tail -14 $o/files.txt
date
(cd $OUT && tar czf r.tgz r)
