#!/bin/sh
# Session 39, call 8. Carry [".deps"]. Why gpu_hot_safety_torch makes no small copy beside a
# registration on this image (torch 2.11): one seed of the Python suite under cmt hot, recorded;
# its copies under 64 KiB by entry point, direction, outcome and host memory.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
export CMT_THRESHOLD=64K CMT_D2H_THRESHOLD=64K CMT_WARM_THRESHOLD=64K CMT_D2H_WARM_THRESHOLD=64K
CMT_REGISTER=hot CMT_STATS=$o/stats.json timeout 120 $b/cmt run --record $o/t.tsv -- python3 tests/hot_safety_torch.py 600 1 > $o/out.txt 2>&1
echo "rc $?"; tail -2 $o/out.txt
python3 - $o/t.tsv <<'PY' | tee $o/small.txt
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if not l.startswith("#")][1:]
c = collections.Counter((r[3], r[4], r[7], r[8]) for r in rows if r[4] != "wait" and int(r[5]) < 65536)
for k, n in c.most_common(20): print(n, *k)
big = collections.Counter((r[3], r[4], r[7], r[8]) for r in rows if r[4] != "wait" and int(r[5]) >= 65536)
print("64 KiB and up:")
for k, n in big.most_common(12): print(n, *k)
PY
python3 -c "import json; s=json.load(open('$o/stats.json')); print(s.get('hot_buffers'))" | tee -a $o/small.txt
gzip -f $o/t.tsv
pack
