#!/bin/sh
# Session 51's first call (carry [".deps"]), on f8577d8. T: seconds this call may take (default 560).
#  1. the host leg's GPU tests on HEAD (c2d2357's top of the address space and fread_states' "a+"
#     states ran only on the CPU in session 50);
#  2. the machine's cgroups, then cmt under a CPU quota (cgroup cpu.max / cfs_quota_us, as
#     docker --cpus and Kubernetes CPU limits set it): cmt-bench-copy and loaders.py's copy
#     scenarios inside a quota of 2 and of 4 CPUs, default against cmt as built (8 copy threads,
#     from the 16 CPUs it can see) against cmt with CMT_THREADS at half the quota, and the
#     cgroup's throttling counts around each run.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
el() { echo $(( $(date +%s) - start )); }
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(el) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
uname -r >> $o/gpu.txt; ldd --version | head -1 >> $o/gpu.txt; nproc >> $o/gpu.txt
timeout 150 ctest --test-dir $b --output-on-failure \
  -R 'gpu_fread_states|gpu_host_copy|gpu_host_faults' > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(el) s"; grep -E "tests passed|Failed|\*\*\*|FAIL" $o/gpu-tests.txt | cut -c1-200; pack
{ cat /proc/self/cgroup; echo; grep cgroup /proc/self/mountinfo; echo; ls /sys/fs/cgroup; } > $o/cgroups.txt 2>&1
cat $o/cgroups.txt | head -30
# mkq NAME CPUS: a cgroup with that quota (period 100 ms); prints its directory
mkq() {
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
    d=/sys/fs/cgroup/$1; mkdir -p $d; echo "$(( $2 * 100000 )) 100000" > $d/cpu.max
  else
    c=$(ls -d /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup/cpu 2>/dev/null | head -1)
    d=$c/$1; mkdir -p $d; echo 100000 > $d/cpu.cfs_period_us; echo $(( $2 * 100000 )) > $d/cpu.cfs_quota_us
  fi
  echo $d
}
inq() { d=$1; shift; sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$d" "$@"; }
export CMT_CONFIGS_DIR=
for q in 2 4; do
  d=$(mkq cmtq$q $q); echo "quota $q: $d"; cat $d/cpu.max $d/cpu.cfs_quota_us 2>/dev/null
  inq $d sh -c 'cat /proc/self/cgroup | head -3' 
  half=$(( q / 2 ))
  for m in cmt t$half; do
    e=""; [ $m = cmt ] || e="CMT_THREADS=$half"
    cat $d/cpu.stat > $o/q$q-bench-$m.stat
    env $e timeout 60 sh -c "echo \$\$ > $d/cgroup.procs && exec $b/cmt-bench-copy --sizes 1M,16M,256M --reps 5 --json $o/q$q-bench-$m.json" > $o/q$q-bench-$m.txt 2>&1
    echo "bench q$q $m rc $? at $(el) s"; cat $d/cpu.stat >> $o/q$q-bench-$m.stat; pack
  done
  left=$(( ${T:-560} - $(el) )); [ $q = 2 ] && left=$(( left / 2 + 20 ))
  cat $d/cpu.stat > $o/q$q-loaders.stat
  timeout $left sh -c "echo \$\$ > $d/cgroup.procs && exec python3 bench/workloads/loaders.py $b/cmt --rounds 2 --mode t$half:CMT_THREADS=$half --mode t${half}s:CMT_THREADS=$half,CMT_SPIN_US=0 --deadline $(( left - 25 )) --workdir /tmp/cmt-loaders --json $o/q$q-loaders.json" > $o/q$q-loaders.txt 2>&1
  echo "loaders q$q rc $? at $(el) s"; cat $d/cpu.stat >> $o/q$q-loaders.stat
  cut -c1-220 $o/q$q-loaders.txt | tail -14; pack
done
(cd $OUT && tar czf r.tgz r && rm -rf r)
