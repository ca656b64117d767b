#!/bin/sh
# Session 30's first device call (issue 32): each copy on a lane starts in the ring's slot after
# the previous copy's last piece (before: every copy started at slot 0, so a copy following one
# of more pieces than slots waited for one of its last DMAs before staging its first piece).
# This tree against HEAD (6fd5b3d, git archive in the ignored .old-src/, carried), both built here.
#  1. the engine's GPU tests;
#  2. cmt bench copy, 8 threads on own streams, 8/16/22 MiB H2D, new / old alternating, 2 rounds;
#  3. loaders.py (1/4/8 Python threads from a fresh mapping and resident, 1 ms gaps, pinned,
#     from_pretrained's second call): default, cmt (new), old (CMT_LIBRARY=build-old), 2 rounds,
#     then one recorded round of each cmt mode.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
left() { echo $(( ${BUDGET:-575} - ($(date +%s) - start) )); }
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake-old.txt 2>&1 &&
  cmake --build build-old > $o/build-old.txt 2>&1; echo $? > $o/build-old.rc) &
wait
[ "$(cat $o/build.rc)" = 0 ] && [ "$(cat $o/build-old.rc)" = 0 ] || { tail -20 $o/build.txt $o/build-old.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
timeout 90 build-gpu/tests/cmt_gpu_tests > $o/gpu-tests.txt 2>&1; echo "gpu tests rc $?"
grep -E "PASSED|FAILED" $o/gpu-tests.txt | tail -5
for r in 1 2; do
  for b in build-gpu build-old; do
    echo "== $b round $r" >> $o/bench8.txt
    CMT_CONFIGS_DIR= timeout 60 $b/cmt bench copy --threads 8 --stream own --sizes 8M,16M,22M \
      --patterns h2d --seconds 0.5 --rounds 2 --json $o/bench8-$b-$r.json >> $o/bench8.txt 2>&1
  done
done
grep -E "^==|cmt|pinned" $o/bench8.txt | head -40
pack
echo "at $(( $(date +%s) - start )) s"
t=$(left); CMT_CONFIGS_DIR= timeout $t python3 bench/workloads/loaders.py build-gpu/cmt --rounds 2 --hf \
  --mode old:CMT_LIBRARY=$PWD/build-old/libcmt.so --record $o/rec --json $o/loaders.json > $o/loaders.txt 2>&1
grep -v "^child\|Writing" $o/loaders.txt | tail -16
for f in $o/rec/*.tsv; do [ -f "$f" ] && python3 bench/lab/trace_windows.py $f > $f.windows.txt 2>&1; done
tail -n +1 $o/rec/*.windows.txt 2>/dev/null | head -40
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
