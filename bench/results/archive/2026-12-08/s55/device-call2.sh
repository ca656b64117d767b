#!/bin/sh
# Session 55, call 2 (carry [".deps", ".old-src"]: .old-src/h = fbbb314): the final hold design
# (each hook holds; hooks/hook_hold.h) on the GPU, gpu_host_faults with cancel-copy; then the
# file loaders against fbbb314 again, for the fread 16 MiB row that call 1 left unsettled
# (16.1 against 19.0 GB/s in 4 rounds). T: seconds from the start the loaders must end by.
start=$(date +%s); o=$OUT/r; mkdir -p $o
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt_cli \
  cmt_gpu_host_faults_app > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
echo "built at $(( $(date +%s) - start )) s: $(cat $o/build.rc) $(cat $o/build-head.rc)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
a=build-gpu/tests/cmt_gpu_host_faults_app
timeout 60 env LD_PRELOAD=$PWD/build-gpu/libcmt.so:$PWD/build-gpu/libcmt-host.so $a cancel-copy \
  > $o/cancel-copy-cmt.txt 2>&1; echo "cancel-copy with cmt: exit $?"; cat $o/cancel-copy-cmt.txt
ctest --test-dir build-gpu -R gpu_host_faults --timeout 120 -V > $o/ctest-host-faults.txt 2>&1
echo "gpu_host_faults rc $? at $(( $(date +%s) - start )) s"; grep -E "ok |FAIL" $o/ctest-host-faults.txt | tail -3
export CMT_CONFIGS_DIR=
left=$(( ${T:-330} - $(date +%s) + start ))
echo "loaders get $left s"
timeout $left python3 bench/workloads/loaders.py build-gpu/cmt --rounds 8 --files-only \
  --deadline $(( left - 15 )) --mode head:CMT_LIBRARY=$PWD/build-head/libcmt.so \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; cut -c1-220 $o/loaders.txt | tail -11
(cd $OUT && tar czf r.tgz r)
