#!/bin/sh
# Session 40, call 4. Carry [".deps"]. Call 3's pass-by-pass loop never met the slow state that
# loaders.py's 16 MiB read scenarios met in 9 of 36 runs (call 2). Here each pass as loaders.py
# makes it (new GPU tensor and pinned buffer, after empty_cache), and after a 1 MiB pass and its
# check, as loaders.py's order has it; default and cmt alternating.
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
  env CMT_CONFIGS_DIR= CMT_STATS=$o/stats-$n.json "$@" > $o/$n.txt 2>&1
  echo "$n rc $? $(tail -1 $o/$n.txt | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("median %.1f min %.1f max %.1f" % (d["median_gbps"], d["min_gbps"], d["max_gbps"]), [round(r["gbps"],1) for r in d["passes"]], d["check"])' 2>&1)"
}
L="python3 bench/lab/read_loop.py $f --passes 10"
run d-fresh CMT_DISABLE=1 $b/cmt run -- $L --fresh
run c-fresh $b/cmt run -- $L --fresh
run c-fresh-fread $b/cmt run -- $L --fresh --fread
run c-after1m $b/cmt run -- $L --fresh --after-1m
run d-after1m CMT_DISABLE=1 $b/cmt run -- $L --fresh --after-1m
run c-after1m-fread $b/cmt run -- $L --fresh --after-1m --fread
run c-fresh-b $b/cmt run -- $L --fresh
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
