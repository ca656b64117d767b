#!/bin/sh
# Session 28's second device call (issue 33: a set of hot buffers larger than register_max; the
# admission rule, evictions taken back on cmt-release). This tree against the commit before it
# (6e348ef, git archive in the ignored .old-src/, carried), both built here.
#  1. cmt-lab-weight-set (a 1.1B Llama's 2.2 GB of weights as separate buffers, pass after pass)
#     under cmt hot with CMT_REGISTER_MAX=1G, new / old alternating, 2 rounds; then staged
#     (register off) and hot with the default bound (everything fits) once each.
#  2. offloaded inference (offload.py, accelerate cpu_offload), 2 rounds: pinned, staged,
#     hot with CMT_REGISTER_MAX=1G new and old (CMT_LIBRARY=build-old/libcmt.so).
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake-old.txt 2>&1 &&
  cmake --build build-old > $o/build-old.txt 2>&1; echo $? > $o/build-old.rc) &
wait
[ "$(cat $o/build.rc)" = 0 ] && [ "$(cat $o/build-old.rc)" = 0 ] || { tail -20 $o/build.txt $o/build-old.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
lab() {  # NAME CMT ENV...: the lab's pinned and pageable modes under that cmt
  name=$1 cmt=$2; shift 2
  echo "== $name $*" >> $o/weight-set.txt
  env CMT_CONFIGS_DIR= CMT_STATS=$o/ws-$name-%p.stats.json "$@" timeout 80 $cmt run -- build-gpu/cmt-lab-weight-set \
    --passes 6 --modes pinned,pageable >> $o/weight-set.txt 2>&1
}
for r in 1 2; do
  lab new-cap build-gpu/cmt CMT_REGISTER=hot CMT_REGISTER_MAX=1G
  lab old-cap build-old/cmt CMT_REGISTER=hot CMT_REGISTER_MAX=1G
done
lab staged build-gpu/cmt CMT_REGISTER=off
lab new-nocap build-gpu/cmt CMT_REGISTER=hot
grep -E "^==|pageable|pinned" $o/weight-set.txt
pack
echo "at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= CMT_STATS=$o/offload-%p.stats.json timeout 400 python3 bench/workloads/offload.py build-gpu/cmt \
  --rounds 2 --passes 5 --modes pinned,staged --mode hotcap:hot:CMT_REGISTER_MAX=1G \
  --mode hotcap-old:hot:CMT_REGISTER_MAX=1G,CMT_LIBRARY=$PWD/build-old/libcmt.so \
  --json $o/offload.json > $o/offload.txt 2>&1
tail -12 $o/offload.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
