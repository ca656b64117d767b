#!/bin/sh
# Session 27's second device call (issue 32, the new defaults: host_reads = all with the page-cache
# probe, reads into new buffers prepared as fresh; register_free_later = 1). The file loaders
# (loaders.py --files-only), 3 rounds in alternating processes: default / cmt (built-in
# defaults) / readspinned (CMT_HOST_READS=pinned, the default before); recorded rounds and their
# trace show. Then the GPU tests the new defaults touch most, then the rest of device_check.sh's
# tests stage in the time left. (Its first try was lost: the machine was taken back mid-call.)
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-585} - ($(date +%s) - start) )); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= timeout 240 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 3 --files-only \
  --mode readspinned:CMT_HOST_READS=pinned --record $o/rec --workdir /tmp/cmt-loaders \
  --json $o/files.json > $o/files.txt 2>&1
tail -11 $o/files.txt
for t in $o/rec/*.tsv; do build-gpu/cmt trace show $t > ${t%.tsv}.show.txt 2>&1; done
pack
echo "at $(( $(date +%s) - start )) s"
first="gpu_host_copy|gpu_host_faults|gpu_torch_dataloader|gpu_torch$|gpu_structured_hot|gpu_driver_app"
t=$(left); timeout $t ctest --test-dir build-gpu -R "$first" --output-on-failure > $o/ctest-first.log 2>&1
grep -E "tests passed|\(Failed\)|Test +#" $o/ctest-first.log
pack
t=$(left); [ $t -gt 30 ] && timeout $t ctest --test-dir build-gpu -R "gpu_|GpuEngine|GpuTuner|getproc|taken_once|dlsym" \
  -E "gpu_stress|gpu_hot_safety|$first" --output-on-failure > $o/ctest.log 2>&1
grep -E "tests passed|\(Failed\)|Total Test time|Test +#" $o/ctest.log | tail -24
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
