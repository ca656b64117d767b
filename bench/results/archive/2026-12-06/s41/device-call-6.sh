#!/bin/sh
# Session 41, call 6. Carry [".deps"]. Call 5 (lab/thread_copies.py): with every copy free to open a
# lane (CMT_LANE_SPLIT_FROM=0) four Python threads copied at 34.1-34.6 GB/s against 30.3-31.0 on the
# built-in one shared lane below 64 MiB; eight at 36.5-37.0 against 36.8-38.4. Here loaders.py's
# copy scenarios and from_pretrained, default / cmt / split0, in alternating
# processes, as many rounds as fit (of 4).
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
left=$(( 390 - ($(date +%s) - start) ))
CMT_CONFIGS_DIR= timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 4 --hf \
  --mode split0:CMT_LANE_SPLIT_FROM=0 \
  --deadline $(( left - 90 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; grep -v "^child" $o/loaders.txt | tail -16
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
