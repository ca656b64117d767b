#!/bin/sh
# Session 39, call 5. Carry [".deps"].
#  1. the GPU tests call 4 had no time left for (hot safety, structured hot, the host leg's);
#  2. offload.py's same-process child (staged / pinned / default) recorded as trace version 6:
#     offload_passes.py shows each mode's waits in synchronize calls and its own work;
#  3. `cmt bench replay` of call 4's staged trace, passes 3-8 only (--window 1.45:2.7: the first
#     two passes hold the process's start-up), default / cmt / pinned.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= CMT_REGISTER=off timeout 100 $b/cmt run --record $o/same.tsv -- python3 bench/workloads/offload.py \
  --child-same 6 staged > $o/same-child.json 2> $o/same-child.err
echo "record rc $? at $(( $(date +%s) - start )) s"
python3 bench/lab/offload_passes.py $o/same.tsv > $o/same-passes.txt 2>&1; grep -A1 "passes\|median" $o/same-passes.txt | grep -v "^ *[0-9]"
$b/cmt trace show $o/same.tsv > $o/same-show.txt 2>&1; grep -A1 "^waits" $o/same-show.txt
gzip -f $o/same.tsv
pack
zcat bench/results/archive/2026-12-06/s39/call4/staged.tsv.gz > /tmp/staged.tsv
CMT_CONFIGS_DIR= timeout 150 $b/cmt bench replay /tmp/staged.tsv --window 1.45:2.7 --rounds 3 --json $o/replay-window.json > $o/replay-window.txt 2>&1
echo "replay rc $? at $(( $(date +%s) - start )) s"; tail -8 $o/replay-window.txt
pack
left=$(( 560 - ($(date +%s) - start) ))
[ $left -gt 30 ] && timeout $left ctest --test-dir $b -R "gpu_structured_hot|gpu_host_copy|gpu_host_faults|gpu_hot_safety_torch|gpu_hot_safety" \
  --output-on-failure > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $?"; grep -E "Test +#|tests passed|Failed" $o/gpu-tests.txt | head
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
