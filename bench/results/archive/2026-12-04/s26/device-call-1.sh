#!/bin/sh
# Session 26's first device call (issue 33, then issue 32's read claim): build; offloaded inference
# with hot / pinned / default passes rotating in one process (offload.py --same-process, 3
# processes x 6 passes); gpu_host_copy (file reads against the real driver, the new shared-
# descriptor and procfs checks among them); the C safety suite, seeds 1-10 x 10000, 5 processes
# at a time; the Python safety suite 3 x 2000. Results tarred after each step.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s at $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
CMT_CONFIGS_DIR= CMT_STATS=$o/same-%p.stats.json timeout 200 python3 bench/workloads/offload.py \
  build-gpu/cmt --same-process --rounds 3 --passes 6 --json $o/offload-same.json > $o/offload-same.txt 2>&1
tail -9 $o/offload-same.txt
pack
timeout 90 ctest --test-dir build-gpu -R "gpu_host_copy" --output-on-failure > $o/host-copy.log 2>&1
grep -E "tests passed|ok   |FAIL" $o/host-copy.log | cut -c1-160
echo "at $(( $(date +%s) - start )) s"
HOT_SAFETY_JOBS=5 timeout 300 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu \
  10000 10 gpu > $o/hot-safety.txt 2>&1
tail -8 $o/hot-safety.txt
pack
echo "at $(( $(date +%s) - start )) s"
HOT_SAFETY_JOBS=3 CMT_CONFIGS_DIR= timeout 100 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py \
  2000 3 gpu > $o/hot-safety-torch.txt 2>&1
grep -v "DeprecationWarning\|pid = os.fork" $o/hot-safety-torch.txt | tail -6
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
