#!/bin/sh
# Session 44, call 1 (carry [".deps"]): s43/device-call-next.sh with two more lab variants.
# (1) The hot loop (NOTES 89-90): cmt-lab-registered copying as cmt bench copy's loop does
#     (--block 5000 --buffers malloc), beside cmt bench copy itself, 2 passes. --neighbour none,
#     idle (the default-mode buffer malloc'd before cmt's, never copied: the shared page alone) and
#     default (that buffer copied by CUDA's own path between blocks); --thread fresh (one thread
#     a size and direction) and block (one a block, as the benchmark makes one a window).
# (2) What the file loaders' CPU per GB under cmt buys: built-in settings against CMT_SPIN_US=0
#     and CMT_THREADS=4 (loaders.py --files-only, 3 rounds).
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
for r in 1 2; do
  for v in fresh:none fresh:idle fresh:default block:none block:default; do
    t=${v%%:*}; n=${v#*:}
    CMT_REGISTER=hot $b/cmt run -- $b/cmt-lab-registered --sizes 64K,256K --reps 5000 --block 5000 \
      --thread $t --buffers malloc --neighbour $n > $o/lab-$t-$n-$r.txt 2>&1
    echo "== lab --thread $t --neighbour $n, pass $r"; grep -E "^(64K|256K)|mean|check" $o/lab-$t-$n-$r.txt
  done
  CMT_REGISTER=hot $b/cmt bench copy --threads 1 --stream own --sizes 64K,256K --patterns h2d,d2h \
    --seconds 0.2 --rounds 3 > $o/loop-$r.txt 2>&1
  echo "== cmt bench copy, pass $r"; grep -E "x 1 threads|cmt/pinned|^  (cmt|pinned|default) " $o/loop-$r.txt
done
pack
left=$(( 560 - ($(date +%s) - start) ))
[ $left -gt 150 ] && timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --files-only \
  --mode spin0:CMT_SPIN_US=0 --mode threads4:CMT_THREADS=4 --deadline $(( left - 50 )) \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | tail -14
pack
