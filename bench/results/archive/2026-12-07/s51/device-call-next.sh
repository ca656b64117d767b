#!/bin/sh
# Ready for a later session, not run in 51 (no machine; carry [".deps", ".old-src"]): the same comparison as call 2 in a cgroup
# of 8 CPUs (new: 4 copy threads; head f8577d8: 8), loaders.py's copy scenarios, 2 rounds.
start=$(date +%s); o=$OUT/r; mkdir -p $o
el() { echo $(( $(date +%s) - start )); }
pack() { (cd $OUT && tar czf r.tgz r); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt_cli > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
for b in build build-head; do [ "$(cat $o/$b.rc)" = 0 ] || { tail -20 $o/$b.txt; pack; exit 1; }; done
echo "built at $(el) s"
(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; nproc) > $o/gpu.txt; cat $o/gpu.txt
export CMT_CONFIGS_DIR=
echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
q=8; d=/sys/fs/cgroup/cmtq$q; mkdir -p $d; echo "$(( q * 100000 )) 100000" > $d/cpu.max
sh -c "echo \$\$ > $d/cgroup.procs && exec build-gpu/cmt topo" > $o/topo-q$q.txt 2>&1; grep quota $o/topo-q$q.txt
left=$(( ${T:-300} - $(el) ))
cat $d/cpu.stat > $o/q$q-loaders.stat
timeout $left sh -c "echo \$\$ > $d/cgroup.procs && exec python3 bench/workloads/loaders.py build-gpu/cmt --rounds 3 --reps 2 --mode head:CMT_LIBRARY=$PWD/build-head/libcmt.so --deadline $(( left - 20 )) --workdir /tmp/cmt-loaders --json $o/q$q-loaders.json" > $o/q$q-loaders.txt 2>&1
echo "loaders q$q rc $? at $(el) s"; cat $d/cpu.stat >> $o/q$q-loaders.stat
grep -v "^child\|Writing" $o/q$q-loaders.txt | cut -c1-230 | tail -13
(cd $OUT && tar czf r.tgz r && rm -rf r)
