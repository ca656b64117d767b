#!/bin/sh
# NOT RUN: every start was refused (03:05-04:33 UTC); device-call-2b.sh ran a trimmed part of it.
# Session 37's second device call. Carry [".deps"].
#  1. the CPU's topology (are the 16 CPUs 8 cores with two threads each?), and what spinning
#     threads cost a thread beside them, and how late naps end (cmt-lab-spin-cost);
#  2. offloaded inference: call 1's traces say the program's own work between copies took ~1/3
#     longer under staging than with pinned weights (17 ms a pass) while cmt's copy threads spun
#     through the ~0.45 ms gaps: staged with the threads never spinning (CMT_SPIN_US=0), spinning
#     300 us (gaps longer than that are napped through, waking ahead of the next copy), with 4
#     threads a copy, against staged, pinned and auto (auto now timing copies from its
#     registrations on their streams too);
#  3. call 1's staged trace replayed over its last six passes only (the first pass's 1.2 s of the
#     program's start-up work dilutes the whole trace's ratio), its CPU gaps as work of a fixed
#     size (the new default, which what slows the program's work slows too) and as busy loops, and
#     under hot and auto (the replay now preloads libcmt-release.so; call 1's hot replay staged);
#     the replay test again (it now checks that hot registers);
#  (cmt-lab-copied-few under off and auto was planned here and cut: the device budget, spent on
#  refused starts.)
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release cmt-bench-replay \
    cmt-lab-copied-few cmt-lab-spin-cost > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
lscpu > $o/lscpu.txt; grep -E "^CPU\(s\)|Thread|Core|Socket|Model name|NUMA" $o/lscpu.txt
echo "built at $(( $(date +%s) - start )) s"
timeout 60 $b/cmt-lab-spin-cost --spinners 4,7,8,12,14,15 > $o/spin-cost.txt 2>&1; cat $o/spin-cost.txt
CMT_CONFIGS_DIR= timeout 170 python3 bench/workloads/offload.py $b/cmt --rounds 1 --passes 20 \
  --modes staged,pinned --mode spin0:staged:CMT_SPIN_US=0 --mode spin300:staged:CMT_SPIN_US=300 \
  --mode threads4:staged:CMT_THREADS=4 \
  --mode auto:hot:CMT_REGISTER=auto --json $o/offload.json > $o/offload.txt 2>&1
echo "offload rc $?"; tail -9 $o/offload.txt
pack
echo "offload done at $(( $(date +%s) - start )) s"
t=/tmp/offload-off.tsv
gunzip -c bench/results/archive/2026-12-06/s37/call1/rec/offload-off.tsv.gz > $t
CMT_CONFIGS_DIR= timeout 60 $b/cmt bench replay $t --window 1.344:2.3 --rounds 3 > $o/replay-window.txt 2>&1
cat $o/replay-window.txt
CMT_CONFIGS_DIR= timeout 40 $b/cmt bench replay $t --window 1.344:2.3 --rounds 3 --modes cmt,pinned --gap-work time > $o/replay-window-time.txt 2>&1
tail -2 $o/replay-window-time.txt
for m in hot; do  # libcmt-release.so now preloaded by the replay itself (call 1's were staged)
  CMT_CONFIGS_DIR= CMT_REGISTER=$m timeout 40 $b/cmt bench replay $t --window 1.344:2.3 --rounds 3 --modes cmt > $o/replay-window-$m.txt 2>&1
  tail -1 $o/replay-window-$m.txt
done
timeout 100 ctest --test-dir $b -R "^gpu_bench_replay$" --output-on-failure > $o/ctest.txt 2>&1
echo "ctest rc $?"; grep -E "ok:|FAIL" $o/ctest.txt
pack
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
