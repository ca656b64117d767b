#!/bin/sh
# session 24's second device call: build; the GPU tests the first call's 300 s ctest limit cut
# off (gpu_stress aside); offloaded inference hot / pinned / staged, one round and one recorded
# hot run, with each process's statistics (release reports and their time among them).
o=$OUT/r; mkdir -p $o
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; cd $OUT && tar czf r.tgz r; exit 1; }
date
timeout 200 ctest --test-dir build-gpu -R "gpu_torch_dataloader|gpu_hot_safety|gpu_host_copy|gpu_host_faults" \
  --output-on-failure > $o/ctest-rest.log 2>&1
grep -E "Test +#|tests passed|\(Failed\)|Total Test time" $o/ctest-rest.log
(cd $OUT && tar czf r.tgz r)
date
CMT_CONFIGS_DIR= CMT_STATS=$o/offload-%p.stats.json timeout 250 python3 bench/workloads/offload.py build-gpu/cmt \
  --rounds 1 --passes 5 --modes hot,pinned,staged --record $o/rec-offload --json $o/offload.json > $o/offload.txt 2>&1
tail -8 $o/offload.txt
build-gpu/cmt trace show $o/rec-offload/offload-hot.tsv > $o/rec-offload/show.txt 2>&1
for f in $o/offload-*.stats.json; do grep -o '"hot_buffers": {[^}]*}' $f; done
date
(cd $OUT && tar czf r.tgz r)
