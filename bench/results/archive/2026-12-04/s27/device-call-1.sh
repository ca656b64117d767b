#!/bin/sh
# Session 27's first device call. Issue 32: the file loaders (loaders.py --files-only), 3 rounds
# in alternating processes, default / cmt / CMT_HOST_READS=all with reads into new buffers
# prepared as fresh (huge pages, faulted in on all threads) / the same with CMT_FRESH_PAGES=off
# (reads as before this session). Issue 33: session 26's sixth call (its device-call-6.sh): frees
# of registered chunks finished on cmt's release thread (CMT_REGISTER_FREE_LATER=1) while a
# kernel spins, the C safety suite 10 x 10000 and the Python one 3 x 2000, gpu_structured_hot and
# gpu_host_copy. Results tarred after each step.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( 590 - ($(date +%s) - start) )); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= timeout 290 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 3 --files-only \
  --mode reads:CMT_HOST_READS=all --mode readsold:CMT_HOST_READS=all,CMT_FRESH_PAGES=off \
  --record $o/rec --workdir /tmp/cmt-loaders --json $o/files.json > $o/files.txt 2>&1
tail -12 $o/files.txt
pack
echo "at $(( $(date +%s) - start )) s"
CMT_REGISTER=hot CMT_REGISTER_FREE_LATER=1 CMT_STATS=$o/register-wait-hot.stats.json timeout 40 build-gpu/cmt run -- \
  build-gpu/cmt-lab-register-wait --spin-ms 200 --reps 3 > $o/register-wait-hot.txt 2>&1
echo "under cmt hot:"; tail -4 $o/register-wait-hot.txt
grep -o '"freed_later": [0-9]*' $o/register-wait-hot.stats.json
timeout 40 build-gpu/cmt-lab-register-wait --spin-ms 200 --reps 3 > $o/register-wait-alone.txt 2>&1
echo "alone:"; tail -4 $o/register-wait-alone.txt
pack
HOT_SAFETY_JOBS=5 timeout 130 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu \
  10000 10 gpu > $o/hot-safety.txt 2>&1
tail -7 $o/hot-safety.txt
pack
HOT_SAFETY_JOBS=3 CMT_CONFIGS_DIR= timeout 50 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py \
  2000 3 gpu > $o/hot-safety-torch.txt 2>&1
grep -v "DeprecationWarning\|pid = os.fork" $o/hot-safety-torch.txt | tail -5
pack
echo "at $(( $(date +%s) - start )) s"
t=$(left); [ $t -gt 20 ] && timeout $t ctest --test-dir build-gpu -R "gpu_structured_hot|gpu_host_copy" --output-on-failure > $o/ctest.log 2>&1
grep -E "tests passed|Failed|Test +#" $o/ctest.log
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
