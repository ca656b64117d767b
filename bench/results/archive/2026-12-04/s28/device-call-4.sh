#!/bin/sh
# Session 28's fourth device call: call 3's C suite failed one seed of ten (seed 6: a
# cuMemcpy3DAsync the program left to CUDA returned CUDA_ERROR_INVALID_VALUE). The same ten seeds
# again, five at a time, on this tree and on the commit before it (.old-src), to see whether it
# comes back on either.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake-old.txt 2>&1 &&
  cmake --build build-old > $o/build-old.txt 2>&1; echo $? > $o/build-old.rc) &
wait
echo "built in $(( $(date +%s) - start )) s: $(cat $o/build.rc) $(cat $o/build-old.rc)"
for b in gpu old; do
  HOT_SAFETY_JOBS=5 timeout 150 tests/hot_safety.sh build-$b/cmt build-$b/tests/cmt_hot_safety_gpu \
    10000 10 gpu > $o/hot-safety-$b.txt 2>&1
  echo "== $b"; grep -v "^ops 10000" $o/hot-safety-$b.txt | tail -8
  pack
done
echo "done at $(( $(date +%s) - start )) s"
