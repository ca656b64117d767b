#!/bin/sh
# Session 53's device call (carry [".deps", ".old-src"]): CUDA contexts that end mid-run.
# Which driver entry points cudaDeviceReset reaches (context_end_probe.cpp, no cmt); whether a
# portable registration outlives its context; the new test (tests/context_life.sh) with this
# tree's library; then the same scenarios under fbbb314's library (build-head), for comparison.
# SHORT=1: its shortest form, for a call with little device time left (2-3 minutes instead of
# about 4): the probe of the dynamic build only, shorter limits, fewer of fbbb314's scenarios.
if [ "${SHORT:-0}" = 1 ]; then
  probes=dynamic; limit=60; each=20; head_runs="dynamic:reset dynamic:contexts dynamic:primary"
else
  probes="dynamic static"; limit=150; each=60
  head_runs="dynamic:reset dynamic:contexts dynamic:primary dynamic:two static:reset"
fi
start=$(date +%s); o=/tmp/r; rm -rf $o; mkdir -p $o
# Logs packed into $OUT/r.tgz after each phase, so a call cut short still brings back what it did.
pack() { tar czf $OUT/r.tgz -C /tmp r; }
el() { echo $(( $(date +%s) - start )); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
g++ -O1 -shared -fPIC -I/usr/local/cuda/include bench/lab/context_end_probe.cpp -o $o/libprobe.so -ldl
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt_context_life_dynamic cmt_context_life_static > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
echo "built at $(el) s: $(cat $o/build.rc) $(cat $o/build-head.rc)"; tail -2 $o/build.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
a=build-gpu/tests
for v in $probes; do
  echo "== probe $v"; LD_PRELOAD=$o/libprobe.so $a/cmt_context_life_$v reset 1 2>&1 | grep "^\[probe\]" | sort | uniq -c
  LD_PRELOAD=$o/libprobe.so $a/cmt_context_life_$v primary 1 2>&1 | grep "^\[probe\] cu"
done
$a/cmt_context_life_dynamic probe
pack
for v in dynamic static; do
  echo "== test $v at $(el) s"
  timeout $limit tests/context_life.sh build-gpu/libcmt.so $a/cmt_context_life_$v 6 > $o/test-$v.txt 2>&1
  echo "test $v rc $?"; grep -v "^round\|^large\|failures$" $o/test-$v.txt
  pack
done
for vs in $head_runs; do
  v=${vs%:*}; s=${vs#*:}
  {
    echo "== head $v $s at $(el) s"
    LD_PRELOAD=build-head/libcmt.so CMT_STATS=$o/h-$v-$s.json CMT_LOG=info timeout $each $a/cmt_context_life_$v $s 6 > $o/h-$v-$s.out 2> $o/h-$v-$s.err
    echo "rc $?: $(grep -o 'rss [0-9]* MiB' $o/h-$v-$s.out | tr '\n' ' ')"; grep -c "wrong bytes" $o/h-$v-$s.err
    grep -v "lane ready" $o/h-$v-$s.err | sed 's/0x[0-9a-f]*/X/g' | sort | uniq -c | sort -rn | head -5
    python3 -c "import json,re;s=json.load(open('$o/h-$v-$s.json'));l=re.search(r'large copies: (\d+)',open('$o/h-$v-$s.out').read());print('taken',s['taken']['h2d']['calls']+s['taken']['d2h']['calls'],'of',l and l.group(1),'fwd',{k:v for k,v in s['forwarded'].items() if v})"
    echo "lanes built: $(grep -c 'lane ready' $o/h-$v-$s.err)"
  }
  pack
done
echo "done at $(el) s"
pack
