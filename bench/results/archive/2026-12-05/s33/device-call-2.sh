#!/bin/sh
# Session 33's second device call (issue 32).
#  1. cmt-lab-register-stream: could a pageable source be registered piece by piece on several
#     threads while the DMA copies the pieces already registered, faster than staging?
#  2. loaders.py copies only, up to 5 rounds (--deadline): default, cmt (this tree), head (ce7200f)
#     (call 1's 3 rounds were cut and one cmt process was slow in every 4- and 8-thread row);
#  3. the whole concurrent benchmark, ce7200f against this tree, one round.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt cmt-bench-copy cmt-bench-concurrent cmt-lab-register-stream > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs cmt cmt-bench-copy cmt-bench-concurrent > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
for b in build build-head; do [ "$(cat $o/$b.rc)" = 0 ] || { tail -20 $o/$b.txt; pack; exit 1; }; done
echo "built in $(( $(date +%s) - start )) s"
timeout 150 build-gpu/cmt-lab-register-stream --reps 3 > $o/register-stream.txt 2>&1; echo "lab rc $?"
cat $o/register-stream.txt; pack
echo "at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout 260 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 5 --deadline 200 \
  --mode head:CMT_LIBRARY=$PWD/build-head/libcmt.so --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; grep -v "^child\|Writing" $o/loaders.txt | tail -16; pack
echo "at $(( $(date +%s) - start )) s"
t=$(( 560 - ($(date +%s) - start) )); [ $t -gt 60 ] && timeout $t python3 bench/versus_concurrent.py build-head/cmt build-gpu/cmt --rounds 1 \
  --out $o/versus --json $o/versus.json > $o/versus.txt 2>&1
[ -f $o/versus.json ] || python3 bench/versus_concurrent.py --runs $o/versus --json $o/versus.json > $o/versus.txt 2>&1
tail -12 $o/versus.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
