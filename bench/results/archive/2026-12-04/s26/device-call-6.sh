#!/bin/sh
# Session 26's sixth device call, not run (the session's device time ran out first; for the next
# session): frees of registered buffers finished on cmt's release thread (LaterFrees,
# CMT_REGISTER_FREE_LATER=1; hot_safety.sh turns it on for even seeds). Build;
# cmt-lab-register-wait under cmt hot and alone (free() of a buffer copied three times while a
# kernel spins 200 ms); the C safety suite 10 x 10000 five at a time and the
# Python one 3 x 2000 on this code; gpu_structured_hot and gpu_host_copy (the session's last
# 5 minutes of device time: offloaded inference, whose passes free nothing, is left out).
# Results tarred after each step.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
CMT_REGISTER=hot CMT_REGISTER_FREE_LATER=1 CMT_STATS=$o/register-wait-hot.stats.json timeout 60 build-gpu/cmt run -- \
  build-gpu/cmt-lab-register-wait --spin-ms 200 --reps 3 > $o/register-wait-hot.txt 2>&1
echo "under cmt hot:"; tail -3 $o/register-wait-hot.txt
grep -o '"freed_later": [0-9]*' $o/register-wait-hot.stats.json
timeout 60 build-gpu/cmt-lab-register-wait --spin-ms 200 --reps 3 > $o/register-wait-alone.txt 2>&1
echo "alone:"; tail -3 $o/register-wait-alone.txt
pack
HOT_SAFETY_JOBS=5 timeout 130 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu \
  10000 10 gpu > $o/hot-safety.txt 2>&1
tail -7 $o/hot-safety.txt
HOT_SAFETY_JOBS=3 CMT_CONFIGS_DIR= timeout 50 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py \
  2000 3 gpu > $o/hot-safety-torch.txt 2>&1
grep -v "DeprecationWarning\|pid = os.fork" $o/hot-safety-torch.txt | tail -5
pack
echo "at $(( $(date +%s) - start )) s"
timeout 60 ctest --test-dir build-gpu -R "gpu_structured_hot|gpu_host_copy" --output-on-failure > $o/ctest.log 2>&1
grep -E "tests passed|Failed" $o/ctest.log
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
