#!/bin/sh
# Session 41, call 5. Carry [".deps"]. Call 4: four Python threads copying the model's tensors through
# cmt ran at 0.93-0.95 of one thread back to back (resident 29.5 / 31.0 GB/s), eight at 39.0.
# bench/lab/thread_copies.py: 1, 4 and 8 threads taking turns pass by pass in one process, default /
# cmt / cmt with the waiters in a synchronize asleep (--blocking-sync) / cmt with any copy free to
# open a lane (CMT_LANE_SPLIT_FROM=0) / pinned; then one recorded cmt run cut into its passes by
# lab/trace_windows.py (each lane's share of the pass, waits for a lane, the first DMA's delay).
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
w=/tmp/cmt-tc; mkdir -p $w
python3 -c "import sys, json; sys.path.insert(0, 'bench/workloads'); import loaders; json.dump(loaders.write_blob('$w/model.bin'), open('$w/model.bin.json', 'w'))"
cat $w/model.bin > /dev/null
echo "ready at $(( $(date +%s) - start )) s"
run() {  # name, env..., command
  n=$1; shift
  env CMT_CONFIGS_DIR= "$@" > $o/$n.txt 2>&1
  echo "$n rc $? $(tail -1 $o/$n.txt | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print({k: round(v,1) for k,v in d["median_gbps"].items()}, d["check"])' 2>&1)"
}
T="python3 bench/lab/thread_copies.py $w/model.bin --passes 6"
for round in 1 2; do
  run default-$round CMT_DISABLE=1 $b/cmt run -- $T
  run cmt-$round $b/cmt run -- $T
  run cmt-blocking-$round $b/cmt run -- $T --blocking-sync
  run cmt-split0-$round CMT_LANE_SPLIT_FROM=0 $b/cmt run -- $T
done
run pinned CMT_DISABLE=1 $b/cmt run -- $T --pinned
run pinned-blocking CMT_DISABLE=1 $b/cmt run -- $T --pinned --blocking-sync
run default-blocking CMT_DISABLE=1 $b/cmt run -- $T --blocking-sync
run cmt-mapped $b/cmt run -- $T --mapped
run cmt-mapped-blocking $b/cmt run -- $T --mapped --blocking-sync
echo "runs done at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= $b/cmt run --record $o/rec.tsv -- python3 bench/lab/thread_copies.py $w/model.bin --passes 2 > $o/rec.txt 2>&1
tail -1 $o/rec.txt
python3 bench/lab/trace_windows.py $o/rec.tsv 5 > $o/rec.windows.txt 2>&1; cat $o/rec.windows.txt
gzip $o/rec.tsv
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
