#!/bin/sh
# Not run (device time): its recording and replays were made by hand on the warm machine after
# device-call-1b.sh, as device-calls-2-3.sh says.
# Session 36's second device call (issue 32: version-4 traces of a real program; issue 33: auto on
# a replayed trace). Carry [".deps"].
#  1. offloaded inference recorded under cmt's staging (register off) and under auto: the
#     version-4 traces, `cmt trace show` of each (its "host buffers copied again" section);
#  2. `cmt bench replay` of the staged trace: default, cmt, pinned; then cmt under auto and hot
#     (the replay keeps the program's reuse of host buffers).
start=$(date +%s)
o=$OUT/r; mkdir -p $o/rec
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail $o/build.txt; pack; exit 1; }
b=build-gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for m in off auto; do
  CMT_CONFIGS_DIR= CMT_REGISTER=$m timeout 100 $b/cmt run --record $o/rec/offload-$m.tsv -- \
    python3 bench/workloads/offload.py --child hot 10 > $o/rec/offload-$m.out 2>&1
  echo "record $m rc $?"; tail -1 $o/rec/offload-$m.out | cut -c1-200
  $b/cmt trace show $o/rec/offload-$m.tsv > $o/rec/offload-$m.show.txt 2>&1
  grep -A8 -i "copied again" $o/rec/offload-$m.show.txt | head -12
done
pack
CMT_CONFIGS_DIR= timeout 150 $b/cmt bench replay $o/rec/offload-off.tsv --rounds 3 --json $o/replay-off.json > $o/replay-off.txt 2>&1
echo "replay rc $?"; tail -8 $o/replay-off.txt
for m in auto hot; do
  CMT_CONFIGS_DIR= CMT_REGISTER=$m timeout 100 $b/cmt bench replay $o/rec/offload-off.tsv --rounds 3 --modes cmt \
    --json $o/replay-$m.json > $o/replay-$m.txt 2>&1
  echo "replay $m rc $?"; tail -4 $o/replay-$m.txt
done
gzip $o/rec/*.tsv
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
