#!/bin/sh
# Session 40, call 1 (session 39's device-call-next.sh as it was). Carry [".deps"].
# how much of each loader's time between copies is waiting for the GPU (a blocking .to() waits
# for every copy; load_file "waits on each DMA") and how much its own work, and the replays,
# which now wait only where the program did.
#  1. loaders.py --hf --files-only --record (one round), `cmt trace show` of each trace;
#  2. `cmt bench replay` of each (3 rounds).
start=$(date +%s)
o=$OUT/r; mkdir -p $o/rec
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release cmt-bench-replay > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
echo "built at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= timeout 300 python3 bench/workloads/loaders.py $b/cmt --rounds 1 --hf --files-only \
  --record $o/rec --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; tail -16 $o/loaders.txt
for t in $o/rec/*.tsv; do $b/cmt trace show $t > ${t%.tsv}.show.txt 2>&1; grep -A1 "^waits" ${t%.tsv}.show.txt; done
pack
for t in $o/rec/*.tsv; do
  left=$(( 560 - ($(date +%s) - start) ))
  [ $left -lt 20 ] && break
  CMT_CONFIGS_DIR= timeout $left $b/cmt bench replay $t --rounds 3 > ${t%.tsv}.replay.txt 2>&1
  echo "replay $t rc $?"; tail -6 ${t%.tsv}.replay.txt
done
gzip $o/rec/*.tsv
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
