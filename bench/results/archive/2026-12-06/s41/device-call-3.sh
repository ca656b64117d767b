#!/bin/sh
# Session 41, call 3. Carry [".deps"]; run with the lab read flush in host_copier.cpp (s40's patch plus
# CMT_LAB_READ_FLUSH_TAIL, this session). Call 1: clwb of each whole stretch read gained at 1 MiB reads
# (12.1 -> 13.5 GB/s) and lost at 16 MiB (18.7/20.6 -> 16.4/17.5): the flush's cost grows with the
# bytes, its gain (lines still dirty in a core's L2) does not. Here: clwb of only the last 512 KiB or
# 1 MiB of each stretch, at 16, 4 and 1 MiB buffers (read(2); fread at 1 MiB), variants alternating.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
f=/tmp/blob.bin; head -c 2200000000 /dev/urandom > $f; cat $f > /dev/null
echo "ready at $(( $(date +%s) - start )) s"
run() {  # name, env..., command
  n=$1; shift
  env CMT_CONFIGS_DIR= "$@" > $o/$n.txt 2>&1
  echo "$n rc $? $(tail -1 $o/$n.txt | python3 -c 'import json,sys,statistics as st; d=json.loads(sys.stdin.read()); p=d["passes"][1:]; print("median %.1f GB/s, reads %.1f ms, rest %.1f ms" % (d["median_gbps"], st.median(r["read_s"]*1e3 for r in p), st.median(r["rest_s"]*1e3 for r in p)), [round(r["gbps"],1) for r in d["passes"]], d["check"])' 2>&1)"
}
for chunk in 16 4 1 1f; do
  L="python3 bench/lab/read_loop.py $f --passes 8 --between none --chunk ${chunk%f}"
  [ $chunk = 1f ] && L="$L --fread"
  rounds="1 2"; [ $chunk = 16 ] || rounds=1
  for round in $rounds; do
    run c$chunk-plain-$round $b/cmt run -- $L
    run c$chunk-clwb-$round CMT_LAB_READ_FLUSH=clwb $b/cmt run -- $L
    [ $chunk = 16 -o $chunk = 4 ] && run c$chunk-tail512k-$round CMT_LAB_READ_FLUSH=clwb CMT_LAB_READ_FLUSH_TAIL=524288 $b/cmt run -- $L
    [ $chunk = 16 ] && run c$chunk-tail1m-$round CMT_LAB_READ_FLUSH=clwb CMT_LAB_READ_FLUSH_TAIL=1048576 $b/cmt run -- $L
  done
  run c$chunk-default CMT_DISABLE=1 $b/cmt run -- $L
done
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
