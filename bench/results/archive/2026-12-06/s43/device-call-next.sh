#!/bin/sh
# NOT RUN (session 43's device budget ended): the next session's first call. Carry [".deps"].
# (1) The hot loop (NOTES 89): cmt-lab-registered as cmt bench copy's loop copies, without and with
#     its default-mode neighbour (--neighbour default: a buffer malloc'd just before cmt's, copied
#     by CUDA's own path with the thread opted out, in blocks between the others), beside cmt bench
#     copy itself: which of the two (the neighbour's page, CUDA's pageable copies between) adds
#     1.2-1.5 us to a hot copy. (2) What the file loaders' CPU per GB under cmt buys (device-call-4.sh
#     of session 43, not run): built-in settings against CMT_SPIN_US=0 and CMT_THREADS=4.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
for r in 1 2; do
  for n in none default; do
    CMT_REGISTER=hot $b/cmt run -- $b/cmt-lab-registered --sizes 64K,256K --reps 5000 --block 5000 \
      --thread fresh --buffers malloc --neighbour $n > $o/lab-$n-$r.txt 2>&1
    echo "== lab --neighbour $n, pass $r"; grep -E "^(64K|256K)|check" $o/lab-$n-$r.txt
  done
  CMT_REGISTER=hot $b/cmt bench copy --threads 1 --stream own --sizes 64K,256K --patterns h2d,d2h \
    --seconds 0.2 --rounds 3 > $o/loop-$r.txt 2>&1
  echo "== cmt bench copy, pass $r"; grep -E "x 1 threads|cmt/pinned|^  (cmt|pinned) " $o/loop-$r.txt
done
pack
left=$(( 560 - ($(date +%s) - start) ))
[ $left -gt 150 ] && timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --files-only \
  --mode spin0:CMT_SPIN_US=0 --mode threads4:CMT_THREADS=4 --deadline $(( left - 50 )) \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | tail -14
pack
