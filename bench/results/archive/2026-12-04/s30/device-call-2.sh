#!/bin/sh
# Session 30's second device call. This tree (5eaa4e3 + cmt-lab-copied-few) and 6fd5b3d (.old-src,
# before the ring cursor), both built here.
#  1. cmt-lab-copied-few (issue 33's default question: fresh buffers copied k times then freed)
#     without cmt, under cmt register off and register hot, processes alternating, 2 rounds;
#  2. the GPU safety suite with malloc_trim no longer hooked (6fd5b3d, not yet run on a GPU):
#     the C program seeds 21-30 x 10000, five processes at a time; the Python one 3 x 2000;
#  3. the concurrent benchmark, 6fd5b3d against this tree (versus_concurrent.py), as time allows.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-570} - ($(date +%s) - start) )); }
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake-old.txt 2>&1 &&
  cmake --build build-old > $o/build-old.txt 2>&1; echo $? > $o/build-old.rc) &
wait
[ "$(cat $o/build.rc)" = 0 ] && [ "$(cat $o/build-old.rc)" = 0 ] || { tail -20 $o/build.txt $o/build-old.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
few() {  # NAME [cmt ENV...]
  name=$1; shift
  echo "== $name $*" >> $o/copied-few.txt
  timeout 60 "$@" build-gpu/cmt-lab-copied-few --reps 9 >> $o/copied-few.txt 2>&1
}
for r in 1 2; do
  few none env
  few staged env CMT_CONFIGS_DIR= CMT_REGISTER=off CMT_STATS=$o/few-staged-$r.json build-gpu/cmt run --
  few hot env CMT_CONFIGS_DIR= CMT_REGISTER=hot CMT_STATS=$o/few-hot-$r.json build-gpu/cmt run --
done
cat $o/copied-few.txt | head -80
pack
echo "at $(( $(date +%s) - start )) s"
HOT_SAFETY_FIRST_SEED=21 HOT_SAFETY_JOBS=5 timeout 220 tests/hot_safety.sh build-gpu/cmt \
  build-gpu/tests/cmt_hot_safety_gpu 10000 10 gpu > $o/hot-safety.txt 2>&1
grep -v "^ops 10000" $o/hot-safety.txt | tail -9
CMT_CONFIGS_DIR= timeout 120 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py 2000 3 gpu \
  > $o/hot-safety-torch.txt 2>&1
grep -v "DeprecationWarning\|pid = os.fork" $o/hot-safety-torch.txt | tail -6
pack
echo "at $(( $(date +%s) - start )) s"
t=$(left); [ $t -gt 60 ] && timeout $t python3 bench/versus_concurrent.py build-old/cmt build-gpu/cmt --rounds 1 \
  --out $o/versus --json $o/versus.json > $o/versus.txt 2>&1
[ -f $o/versus.json ] || python3 bench/versus_concurrent.py --runs $o/versus --json $o/versus.json > $o/versus.txt 2>&1
tail -30 $o/versus.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
