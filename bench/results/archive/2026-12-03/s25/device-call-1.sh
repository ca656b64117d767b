#!/bin/sh
# session 25's first device call. Hot offload lost to pinned by 0.70-0.79 in session 24 while its
# copies ran at link speed; cmt's copy threads woke for one or two staged 1 MiB copies a pass,
# whose registration had been handed back to CUDA. New here: a copy too small to register that
# shares a page with a registration goes through pinned scratch instead of dropping it
# (copy_beside_registered), and the weight-set lab reports its copy threads' CPU. Measured:
# the weight-set lab under hot (spin default and 0, statistics); offloaded inference hot /
# pinned / hot-spin0, 2 rounds, statistics per process; then the hot safety checks (the
# structured test, the C suite 2 x 10000 with the new beside steps, the Python suite, the pointer
# lab); then the other GPU tests in the time left. Results tarred after each step.
start=$(date +%s)
left() { echo $((start + 560 - $(date +%s))); }
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
for spin in 1000 0; do
  CMT_REGISTER=hot CMT_SPIN_US=$spin CMT_STATS=$o/weight-set-spin$spin.stats.json timeout 60 \
    build-gpu/cmt run -- build-gpu/cmt-lab-weight-set --passes 6 --modes pinned,pageable \
    > $o/weight-set-spin$spin.txt 2>&1
  echo "CMT_SPIN_US=$spin"; tail -3 $o/weight-set-spin$spin.txt
  grep -o '"hot_buffers": {[^}]*}' $o/weight-set-spin$spin.stats.json
done
pack
CMT_CONFIGS_DIR= CMT_STATS=$o/offload-%p.stats.json timeout 240 python3 bench/workloads/offload.py \
  build-gpu/cmt --rounds 2 --passes 5 --modes hot,pinned --mode hot-spin0:hot:CMT_SPIN_US=0 \
  --json $o/offload.json > $o/offload.txt 2>&1
tail -7 $o/offload.txt
for f in $o/offload-*.stats.json; do grep -o '"hot_buffers": {[^}]*}' $f; done
pack
echo "hotsafe: $(left) s left"
bench/device_check.sh build-gpu $o hotsafe
pack
t=$(left); echo "gpu tests: $t s left"
[ $t -gt 40 ] && timeout $t ctest --test-dir build-gpu -R "^gpu_|^Gpu" -E "gpu_stress|gpu_hot_safety|gpu_structured_hot" \
  --output-on-failure > $o/ctest-gpu.log 2>&1
grep -E "Test +#|tests passed|\(Failed\)|Timeout" $o/ctest-gpu.log | tail -40
date
pack
