#!/bin/sh
# Session 31's second device call: what the pool change (b3741bb) does to copies that run at once
# and to one thread's copies, against HEAD before it (4a410b7 in .old-src/), both built here.
#  1. the concurrent benchmark, old against new, processes alternating (versus_concurrent.py);
#  2. cmt bench copy --threads 8 on own streams, 8/16/22 MiB H2D (copies taking turns on a lane),
#     and --threads 1 at 1/4/16 MiB each way, old and new alternating, 2 rounds.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-570} - ($(date +%s) - start) )); }
(nvidia-smi --query-gpu=name,driver_version --format=csv; uname -a; nproc) > $o/gpu.txt 2>&1
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake-old.txt 2>&1 &&
  cmake --build build-old > $o/build-old.txt 2>&1; echo $? > $o/build-old.rc) &
wait
[ "$(cat $o/build.rc)" = 0 ] && [ "$(cat $o/build-old.rc)" = 0 ] || { tail -20 $o/build.txt $o/build-old.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"; cat $o/gpu.txt
for r in 1 2; do
  for b in build-gpu build-old; do
    echo "== $b round $r" >> $o/bench.txt
    CMT_CONFIGS_DIR= timeout 60 $b/cmt bench copy --threads 8 --stream own --sizes 8M,16M,22M \
      --patterns h2d --seconds 0.5 --rounds 2 --json $o/bench8-$b-$r.json >> $o/bench.txt 2>&1
    CMT_CONFIGS_DIR= timeout 60 $b/cmt bench copy --threads 1 --stream own --sizes 1M,4M,16M \
      --patterns h2d,d2h --seconds 0.3 --rounds 2 --json $o/bench1-$b-$r.json >> $o/bench.txt 2>&1
  done
done
grep -E "^==|cmt|pinned" $o/bench.txt | head -60
pack
echo "at $(( $(date +%s) - start )) s"
t=$(left); [ $t -gt 60 ] && timeout $t python3 bench/versus_concurrent.py build-old/cmt build-gpu/cmt --rounds 2 \
  --out $o/versus --json $o/versus.json > $o/versus.txt 2>&1
[ -f $o/versus.json ] || python3 bench/versus_concurrent.py --runs $o/versus --json $o/versus.json > $o/versus.txt 2>&1
tail -30 $o/versus.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
