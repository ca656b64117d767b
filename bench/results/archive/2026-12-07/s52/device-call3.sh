#!/bin/sh
# Session 52's third call (carry [".deps", ".old-src"]): the contention rule in real programs,
# against ecf4f2b (.old-src/h, its libraries, by CMT_LIBRARY or LD_PRELOAD).
#  1. bench/workloads/processes.py: 1, 4 and 8 PyTorch processes at once, each moving a 1.1B
#     Llama's 2.2 GB to the GPU and back, default / cmt / head / pinned, 2 rounds;
#  2. one process: loaders.py --files-only (the loaders whose speed the spin bought, NOTES 90),
#     default / cmt / head;
#  3. cmt bench copy --processes 4,8 --patterns d2h under each library, once.
start=$(date +%s); o=$OUT/r; mkdir -p $o
el() { echo $(( $(date +%s) - start )); }
pack() { (cd $OUT && tar czf r.tgz r); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt_cli cmt-bench-processes > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
for b in build build-head; do [ "$(cat $o/$b.rc)" = 0 ] || { tail -20 $o/$b.txt; pack; exit 1; }; done
echo "built at $(el) s"
(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; nproc; free -g | head -2) > $o/gpu.txt; cat $o/gpu.txt
export CMT_CONFIGS_DIR=
head=$PWD/build-head/libcmt.so
timeout 300 python3 bench/workloads/processes.py build-gpu/cmt --processes 1,4,8 --rounds 2 \
  --mode head:CMT_LIBRARY=$head --deadline 270 --json $o/processes.json > $o/processes.txt 2>&1
echo "processes.py rc $? at $(el) s"; cat $o/processes.txt | grep -v "^round"; pack
left=$(( ${T:-585} - $(el) - 70 ))
timeout $left python3 bench/workloads/loaders.py build-gpu/cmt --files-only --rounds 2 --reps 2 --mode head:CMT_LIBRARY=$head --deadline $(( left - 20 )) --workdir /tmp/cmt-loaders --json $o/files.json > $o/files.txt 2>&1
echo "files rc $? at $(el) s"; grep -v "^child\|Writing" $o/files.txt | cut -c1-230 | tail -14; pack
args="--processes 4,8 --patterns d2h --sizes 64M --seconds 1 --rounds 2"
timeout 30 build-gpu/cmt bench copy $args --json $o/d2h-new.json > $o/d2h-new.txt 2>&1; echo "d2h new rc $?"
timeout 30 env LD_PRELOAD=$head build-gpu/cmt-bench-processes $args --json $o/d2h-head.json > $o/d2h-head.txt 2>&1; echo "d2h head rc $?"
grep -E "processes x|cmt   " $o/d2h-*.txt
(cd $OUT && tar czf r.tgz r && rm -rf r)
