#!/bin/sh
# Session 52's second call (carry [".deps", ".old-src"]): idle copy threads that do not spin while
# every CPU is taken (engine/shared/cpu_contention.h), against ecf4f2b (.old-src/h, its libraries).
#  1. cmt bench copy --processes 1,2,4,8, h2d and both, 64 MiB: this build's cmt-bench-processes
#     under each library (head: LD_PRELOAD of build-head's libcmt.so), alternating, 2 x 2 runs;
#  2. one process: loaders.py's copy scenarios, default / cmt / head (CMT_LIBRARY), 2 rounds.
start=$(date +%s); o=$OUT/r; mkdir -p $o
el() { echo $(( $(date +%s) - start )); }
pack() { (cd $OUT && tar czf r.tgz r); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt_cli cmt-bench-processes > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
for b in build build-head; do [ "$(cat $o/$b.rc)" = 0 ] || { tail -20 $o/$b.txt; pack; exit 1; }; done
echo "built at $(el) s"
(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; nproc) > $o/gpu.txt; cat $o/gpu.txt
export CMT_CONFIGS_DIR=
args="--processes 1,2,4,8 --patterns h2d,both --sizes 64M --seconds 1 --rounds 2"
for r in 1 2; do
  timeout 150 build-gpu/cmt bench copy $args --json $o/procs-new-$r.json > $o/procs-new-$r.txt 2>&1
  echo "new $r rc $? at $(el) s"
  timeout 150 env LD_PRELOAD=$PWD/build-head/libcmt.so build-gpu/cmt-bench-processes $args --json $o/procs-head-$r.json > $o/procs-head-$r.txt 2>&1
  echo "head $r rc $? at $(el) s"; pack
done
python3 - $o <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/procs-*.json")):
    r = json.load(open(f))
    print(f.split("/")[-1], " ".join("%s%d %.1f/%.1f/%.1f" % (x["pattern"][0], x["processes"], x["default"]["total_gbps"], x["cmt"]["total_gbps"], x["pinned"]["total_gbps"]) for x in r["results"]))
PY
left=$(( ${T:-570} - $(el) ))
timeout $left python3 bench/workloads/loaders.py build-gpu/cmt --rounds 2 --reps 2 --mode head:CMT_LIBRARY=$PWD/build-head/libcmt.so --deadline $(( left - 20 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(el) s"; grep -v "^child\|Writing" $o/loaders.txt | cut -c1-230 | tail -13
(cd $OUT && tar czf r.tgz r && rm -rf r)
