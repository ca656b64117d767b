#!/bin/sh
# Session 41, call 1. Carry [".deps"]; run with s40/read-flush-lab.patch applied (git apply
# bench/results/archive/2026-12-06/s40/read-flush-lab.patch), taken out after.
# (1) s40's call 6: the read-flush lab variant (CMT_LAB_READ_FLUSH=clwb|clflushopt: each copy thread
#     writes back or evicts the stretch of the pinned buffer it just read) against plain reads and
#     the default path, bench/lab/read_loop.py at 16 MiB (2 rounds) and 1 MiB (1 round), alternating.
# (2) loaders.py's files child recorded five times under cmt (version-6 traces, each call's window
#     beside it) to catch one in the slow state of its 16 MiB read scenarios, and load_bounds.py on
#     each: do its reads (host leg) or its DMAs (waits) lose?
start=$(date +%s)
o=$OUT/r; mkdir -p $o/rec
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
grep -m1 "model name" /proc/cpuinfo; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
f=/tmp/blob.bin; head -c 2200000000 /dev/urandom > $f; cat $f > /dev/null
echo "ready at $(( $(date +%s) - start )) s"
run() {  # name, env..., command
  n=$1; shift
  env CMT_CONFIGS_DIR= "$@" > $o/$n.txt 2>&1
  echo "$n rc $? $(tail -1 $o/$n.txt | python3 -c 'import json,sys,statistics as st; d=json.loads(sys.stdin.read()); p=d["passes"][1:]; print("median %.1f GB/s, reads %.1f ms, rest %.1f ms" % (d["median_gbps"], st.median(r["read_s"]*1e3 for r in p), st.median(r["rest_s"]*1e3 for r in p)), [round(r["gbps"],1) for r in d["passes"]], d["check"])' 2>&1)"
}
for chunk in 16 1; do
  L="python3 bench/lab/read_loop.py $f --passes 8 --between none --chunk $chunk"
  rounds="1 2"; [ $chunk = 1 ] && rounds=1
  for round in $rounds; do
    run c$chunk-plain-$round $b/cmt run -- $L
    run c$chunk-clwb-$round CMT_LAB_READ_FLUSH=clwb $b/cmt run -- $L
    run c$chunk-clflushopt-$round CMT_LAB_READ_FLUSH=clflushopt $b/cmt run -- $L
    run c$chunk-default-$round CMT_DISABLE=1 $b/cmt run -- $L
  done
done
rm -f $f
echo "read-flush done at $(( $(date +%s) - start )) s"
w=/tmp/cmt-loaders
CMT_CONFIGS_DIR= timeout 150 python3 bench/workloads/loaders.py $b/cmt --rounds 1 --files-only --workdir $w \
  --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; tail -12 $o/loaders.txt
for i in 1 2 3 4 5 6; do
  [ $(( $(date +%s) - start )) -gt 500 ] && break
  CMT_CONFIGS_DIR= HF_HUB_OFFLINE=1 timeout 40 $b/cmt run --record $o/rec/files-$i.tsv -- python3 bench/workloads/loaders.py \
    --child files $w/model.pt $w/model.safetensors $w/model.bin $w/model.bin.json 2> $o/rec/files-$i.err | tail -1 > $o/rec/files-$i.json
  echo "files $i: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: round(v,1) for k,v in d["gbps"].items()}, d["check"])' $o/rec/files-$i.json 2>&1)"
  python3 bench/lab/load_bounds.py $o/rec/files-$i.tsv $o/rec/files-$i.json > $o/rec/files-$i.bounds.txt 2>&1
  gzip $o/rec/files-$i.tsv
done
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
