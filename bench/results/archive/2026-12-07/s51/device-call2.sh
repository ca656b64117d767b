#!/bin/sh
# Session 51's second call (carry [".deps", ".old-src"]): cmt sized by the cgroup's CPU quota.
#   build-gpu  this tree (copy threads sized by the quota, common/cpu_quota.h)
#   build-head f8577d8 (session 50's last commit), .old-src/h: its libraries only
#  1. cpu_quota (the test: a cgroup of 0.5 CPU, cmt topo, a profile's threads capped, the fake
#     libcuda's program on 1 thread) and the GpuEngine tests;
#  2. in a cgroup of 2 CPUs, then of 4 (cpu.max, period 100 ms): loaders.py's copy scenarios,
#     default / cmt (new: 1 and 2 copy threads) / head (CMT_LIBRARY: 8 threads), alternating.
start=$(date +%s); o=$OUT/r; mkdir -p $o
el() { echo $(( $(date +%s) - start )); }
pack() { (cd $OUT && tar czf r.tgz r); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
for b in build build-head; do [ "$(cat $o/$b.rc)" = 0 ] || { tail -20 $o/$b.txt; pack; exit 1; }; done
echo "built at $(el) s"
(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; nproc) > $o/gpu.txt; cat $o/gpu.txt
timeout 120 ctest --test-dir build-gpu --output-on-failure -R 'cpu_quota|GpuEngine|CpuQuota' > $o/tests.txt 2>&1
echo "tests rc $? at $(el) s"; grep -E "tests passed|Failed|FAIL|ok:|skipped" $o/tests.txt | cut -c1-200
build-gpu/cmt topo > $o/topo-outside.txt 2>&1
export CMT_CONFIGS_DIR=
echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
for q in 2 4; do
  d=/sys/fs/cgroup/cmtq$q; mkdir -p $d; echo "$(( q * 100000 )) 100000" > $d/cpu.max
  sh -c "echo \$\$ > $d/cgroup.procs && exec build-gpu/cmt topo" > $o/topo-q$q.txt 2>&1; grep quota $o/topo-q$q.txt
  left=$(( ${T:-560} - $(el) )); [ $q = 2 ] && left=$(( left * 2 / 3 ))
  cat $d/cpu.stat > $o/q$q-loaders.stat
  timeout $left sh -c "echo \$\$ > $d/cgroup.procs && exec python3 bench/workloads/loaders.py build-gpu/cmt --rounds 2 --reps 2 --mode head:CMT_LIBRARY=$PWD/build-head/libcmt.so --deadline $(( left - 25 )) --workdir /tmp/cmt-loaders --json $o/q$q-loaders.json" > $o/q$q-loaders.txt 2>&1
  echo "loaders q$q rc $? at $(el) s"; cat $d/cpu.stat >> $o/q$q-loaders.stat
  grep -v "^child\|Writing" $o/q$q-loaders.txt | cut -c1-230 | tail -13; pack
done
(cd $OUT && tar czf r.tgz r && rm -rf r)
