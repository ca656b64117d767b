#!/bin/sh
# Session 52's fourth call (carry [".deps", ".old-src"]): call 3's processes.py again at 8 and 4
# processes (call 3's timeout cut its second round), one round, default / cmt / head / pinned.
start=$(date +%s); o=$OUT/r; mkdir -p $o
el() { echo $(( $(date +%s) - start )); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt_cli > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
echo "built at $(el) s: $(cat $o/build.rc) $(cat $o/build-head.rc)"
export CMT_CONFIGS_DIR=
timeout ${T:-270} python3 bench/workloads/processes.py build-gpu/cmt --processes 8,4 --rounds 1 \
  --mode head:CMT_LIBRARY=$PWD/build-head/libcmt.so --json $o/processes.json > $o/processes.txt 2>&1
echo "processes.py rc $? at $(el) s"; cat $o/processes.txt
(cd $OUT && tar czf r.tgz r && rm -rf r)
