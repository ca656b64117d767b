#!/bin/sh
# Session 53's first call (carry [".deps", ".old-src"]): CUDA contexts that end mid-run.
# Which driver entry points cudaDeviceReset reaches (context_end_probe.cpp, no cmt), whether a
# portable registration outlives its context, then context_life_app's scenarios under fbbb314's
# library (build-head) and this tree's (build-gpu), and the new ctest.
start=$(date +%s); o=$OUT/r; mkdir -p $o
el() { echo $(( $(date +%s) - start )); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
g++ -O1 -shared -fPIC -I/usr/local/cuda/include bench/lab/context_end_probe.cpp -o $o/libprobe.so -ldl
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt_cli cmt_context_life_dynamic cmt_context_life_static > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
echo "built at $(el) s: $(cat $o/build.rc) $(cat $o/build-head.rc)"; tail -3 $o/build.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
a=build-gpu/tests
for v in dynamic static; do
  for s in reset primary contexts; do
    echo "== probe $v $s"; LD_PRELOAD=$o/libprobe.so $a/cmt_context_life_$v $s 2 2>&1 | grep -v "^\[probe\] lookup" | head -12
  done
  LD_PRELOAD=$o/libprobe.so $a/cmt_context_life_$v reset 1 2>&1 | grep "^\[probe\] lookup" | sort | uniq -c
done
$a/cmt_context_life_dynamic probe
for lib in head gpu; do
for v in dynamic static; do
  for s in reset contexts primary two; do
    echo "== $lib $v $s at $(el) s"
    LD_PRELOAD=build-$lib/libcmt.so CMT_STATS=$o/$lib-$v-$s.json CMT_LOG=info timeout 100 $a/cmt_context_life_$v $s 6 > $o/$lib-$v-$s.out 2> $o/$lib-$v-$s.err
    echo "rc $?"; grep -v "^large\|failures" $o/$lib-$v-$s.out | tr '\n' ' '; echo
    grep -v "lane ready" $o/$lib-$v-$s.err | sed 's/0x[0-9a-f]*/X/g' | sort | uniq -c | sort -rn | head -8
    python3 -c "import json;s=json.load(open('$o/$lib-$v-$s.json'));print('taken',s['taken']['h2d']['calls'],s['taken']['d2h']['calls'],'fwd',{k:v for k,v in s['forwarded'].items() if v})"
    echo "lanes built: $(grep -c 'lane ready' $o/$lib-$v-$s.err)"
  done
done
done
echo "== ctest at $(el) s"
for v in dynamic static; do
  tests/context_life.sh build-gpu/libcmt.so $a/cmt_context_life_$v 6 > $o/test-$v.txt 2>&1; echo "test $v rc $?"; tail -6 $o/test-$v.txt
done
echo "done at $(el) s"
(cd $OUT && tar czf r.tgz r && rm -rf r)
