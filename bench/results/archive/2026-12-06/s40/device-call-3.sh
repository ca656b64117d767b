#!/bin/sh
# Session 40, call 3. Carry [".deps"]. The file loaders' 16 MiB read scenarios ran at ~21 or ~9
# GB/s under cmt from one process to the next (call 2). bench/lab/read_loop.py repeats the loop
# pass by pass in one process: default, cmt (recorded, with statistics), and variants.
start=$(date +%s)
o=$OUT/r; mkdir -p $o/rec
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
f=/tmp/blob.bin; head -c 2200000000 /dev/urandom > $f; cat $f > /dev/null
echo "ready at $(( $(date +%s) - start )) s"
run() {  # name, env..., -- args
  n=$1; shift
  env CMT_CONFIGS_DIR= CMT_STATS=$o/stats-$n.json "$@" > $o/$n.txt 2>&1
  echo "$n rc $? $(tail -1 $o/$n.txt | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("median %.1f min %.1f max %.1f" % (d["median_gbps"], d["min_gbps"], d["max_gbps"]), [round(r["gbps"],1) for r in d["passes"]], d["check"])' 2>&1)"
}
L="python3 bench/lab/read_loop.py $f --passes 12"
run default CMT_DISABLE=1 $b/cmt run -- $L
run cmt-a $b/cmt run -- $L
run cmt-rec CMT_RECORD=$o/rec/read16.tsv $b/cmt run -- $L
run cmt-none $b/cmt run -- $L --between none
run cmt-fread $b/cmt run -- $L --fread
run wake0 CMT_WAKE_AHEAD=0 $b/cmt run -- $L
run spin10ms CMT_SPIN_US=10000 $b/cmt run -- $L
run fresh-off CMT_FRESH_PAGES=off $b/cmt run -- $L
run cmt-b $b/cmt run -- $L
run default-b CMT_DISABLE=1 $b/cmt run -- $L
ls $o/rec; gzip $o/rec/*.tsv 2>/dev/null
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
