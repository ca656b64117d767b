#!/bin/sh
# Session 55, one call (carry [".deps", ".old-src"]: .old-src/h = fbbb314, .old-src/h2 = ed0ec88,
# the tree before the context watch):
#  1. gpu_context_life_dynamic and _static at this tree, with the new "unseen" scenario (the
#     primary context reset through libc's dlsym, where no hook of cmt's sees it);
#  2. the same unseen scenario under ed0ec88's library, which has no watch (expected to fail);
#  2b. host_faults_app's new cancel-copy on the GPU, without cmt (what CUDA does with a pending
#     cancellation inside a copy) and under this tree's library, then gpu_host_faults whole;
#  3. the file loaders at this tree against fbbb314's library, alternating, in the time left
#     (session 54's device-call-next.sh): the page question's new fstat costs those rows nothing.
start=$(date +%s); o=$OUT/r; mkdir -p $o
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt_cli \
  cmt_context_life_dynamic cmt_context_life_static cmt_gpu_host_faults_app > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
(cmake -S .old-src/h2 -B build-h2 $cfg > $o/cmake-h2.txt 2>&1 && cmake --build build-h2 --target $libs > $o/build-h2.txt 2>&1; echo $? > $o/build-h2.rc) &
wait
echo "built at $(( $(date +%s) - start )) s: $(cat $o/build.rc) $(cat $o/build-head.rc) $(cat $o/build-h2.rc)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
ctest --test-dir build-gpu -R gpu_context_life --output-on-failure > $o/ctest-context-life.txt 2>&1
echo "context_life rc $? at $(( $(date +%s) - start )) s"
grep -E "unseen|Passed|Failed|ok:|FAIL" $o/ctest-context-life.txt | cut -c1-240 | head -30
for v in dynamic static; do
  LD_PRELOAD=$PWD/build-h2/libcmt.so CMT_LOG=info timeout 60 build-gpu/tests/cmt_context_life_$v unseen 4 \
    > $o/h2-unseen-$v.out 2> $o/h2-unseen-$v.err
  echo "ed0ec88 unseen $v: exit $?"; tail -3 $o/h2-unseen-$v.out; grep -v "lane ready" $o/h2-unseen-$v.err | tail -4
done
a=build-gpu/tests/cmt_gpu_host_faults_app
timeout 60 $a cancel-copy > $o/cancel-copy-plain.txt 2>&1; echo "cancel-copy without cmt: exit $?"
timeout 60 env LD_PRELOAD=$PWD/build-gpu/libcmt.so:$PWD/build-gpu/libcmt-host.so CMT_STATS=$o/cancel-copy.json \
  $a cancel-copy > $o/cancel-copy-cmt.txt 2>&1; echo "cancel-copy with cmt: exit $?"
tail -2 $o/cancel-copy-plain.txt $o/cancel-copy-cmt.txt
ctest --test-dir build-gpu -R gpu_host_faults --timeout 150 --output-on-failure > $o/ctest-host-faults.txt 2>&1
echo "gpu_host_faults rc $? at $(( $(date +%s) - start )) s"; grep -E "ok |FAIL" $o/ctest-host-faults.txt | tail -4
export CMT_CONFIGS_DIR=
left=$(( ${T:-430} - $(date +%s) + start ))
echo "loaders get $left s"
timeout $left python3 bench/workloads/loaders.py build-gpu/cmt --rounds 4 --files-only \
  --deadline $(( left - 20 )) --mode head:CMT_LIBRARY=$PWD/build-head/libcmt.so \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; cut -c1-220 $o/loaders.txt | tail -16
(cd $OUT && tar czf r.tgz r)
