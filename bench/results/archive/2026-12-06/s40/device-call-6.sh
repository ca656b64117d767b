#!/bin/sh
# Session 40, call 6: NOT RUN (two starts failed, then too little device time was left). Carry [".deps"];
# apply read-flush-lab.patch first (git apply bench/results/archive/2026-12-06/s40/read-flush-lab.patch).
# Under cmt the DMA of a pinned buffer that cmt's threads had just read a file into ran at ~37-42 GB/s,
# where the default path's (one thread's read) ran at ~52 and one cmt's host leg had memcpy'd into
# (streaming stores) at ~56 (call 5's traces). Lab variant CMT_LAB_READ_FLUSH=clwb|clflushopt: each
# copy thread writes back or evicts the stretch it read. bench/lab/read_loop.py at 16 MiB (cut from
# 16 and 1 MiB, two rounds, after a failed start), variants alternating; the time outside the reads
# is the DMA and the loop.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
grep -m1 "model name" /proc/cpuinfo
f=/tmp/blob.bin; head -c 2200000000 /dev/urandom > $f; cat $f > /dev/null
echo "ready at $(( $(date +%s) - start )) s"
run() {  # name, env..., command
  n=$1; shift
  env CMT_CONFIGS_DIR= "$@" > $o/$n.txt 2>&1
  echo "$n rc $? $(tail -1 $o/$n.txt | python3 -c 'import json,sys,statistics as st; d=json.loads(sys.stdin.read()); p=d["passes"][1:]; print("median %.1f GB/s, reads %.1f ms, rest %.1f ms" % (d["median_gbps"], st.median(r["read_s"]*1e3 for r in p), st.median(r["rest_s"]*1e3 for r in p)), [round(r["gbps"],1) for r in d["passes"]], d["check"])' 2>&1)"
}
for chunk in 16; do  # cut to one size and one round: a failed start took 180 s of the budget
  L="python3 bench/lab/read_loop.py $f --passes 8 --between none --chunk $chunk"
  for round in 1; do
    run c$chunk-plain-$round $b/cmt run -- $L
    run c$chunk-clwb-$round CMT_LAB_READ_FLUSH=clwb $b/cmt run -- $L
    run c$chunk-clflushopt-$round CMT_LAB_READ_FLUSH=clflushopt $b/cmt run -- $L
    run c$chunk-spin0-$round CMT_SPIN_US=0 $b/cmt run -- $L
  done
  run c$chunk-default CMT_DISABLE=1 $b/cmt run -- $L
done
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
