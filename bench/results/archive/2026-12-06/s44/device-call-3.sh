#!/bin/sh
# Session 44, call 3 (carry [".deps"]; argument: seconds this call may take, 560 by default).
# spin_threads (CMT_SPIN_THREADS, built in 4): of a pool's idle copy threads, at most that many spin
# through a gap between jobs, the rest sleep and the next job wakes them. Against every thread
# spinning (CMT_SPIN_THREADS=0, the build before): (1) cmt bench copy, 256K-64M both ways,
# processes alternating, 2 each: no row slower; (2) loaders.py --files (no --hf: the budget), default / cmt / all
# processes alternating, as many rounds as fit: each row's GB/s and the CPU seconds per GB.
limit=${1:-560}
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
for r in 1 2; do
  for m in cap:CMT_LOG=warn all:CMT_SPIN_THREADS=0; do
    n=${m%%:*}
    env ${m#*:} $b/cmt bench copy --sizes 256K,1M,4M,16M,64M --reps 10 --json $o/copy-$n-$r.json \
      > $o/copy-$n-$r.txt 2>&1
  done
done
python3 - $o <<'PY'
import json, sys, statistics
o = sys.argv[1]
rows = {}
for n in ("cap", "all"):
    for r in (1, 2):
        d = json.load(open(f"{o}/copy-{n}-{r}.json"))
        for x in d["results"]:
            key = (x["bytes"], x["direction"])
            rows.setdefault(key, {}).setdefault(n, []).append(x["cmt"]["median_gbps"])
for (size, dr), v in sorted(rows.items()):
    print(f"{size >> 10:7d}K {dr}  cap {' '.join('%5.1f' % g for g in v['cap'])}   all {' '.join('%5.1f' % g for g in v['all'])}")
PY
pack
left=$(( limit - ($(date +%s) - start) ))
echo "loaders with $left s left"
[ $left -gt 150 ] && timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --files \
  --mode all:CMT_SPIN_THREADS=0 --deadline $(( left - 40 )) \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | tail -24
pack
