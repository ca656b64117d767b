#!/bin/sh
# Session 34's third device call: the GPU tests of the host leg and the hot path on the session's
# last library (the unmapped-source rule, the caller hold's release), and the hot loop of issue 33
# (the same buffer copied again and again, 64 KiB-256 MiB each way, default / hot cmt / pinned).
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 build-gpu/tests/cmt_gpu_tests > $o/gpu-tests.txt 2>&1; echo "gpu tests rc $?"; grep -E "PASSED|FAILED" $o/gpu-tests.txt | tail -4
timeout 300 ctest --test-dir build-gpu -j2 --output-on-failure \
  -R "^(gpu_host_copy|gpu_host_faults|gpu_structured_hot|gpu_driver_app|gpu_preload_app_static|gpu_bench_replay|gpu_stress)$" > $o/ctest.txt 2>&1
echo "ctest rc $?"; grep -E "Test +#|tests passed|Total Test" $o/ctest.txt; pack
echo "at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= CMT_REGISTER=hot timeout 100 build-gpu/cmt run -- build-gpu/cmt bench copy --threads 1 --stream own \
  --sizes 64K,256K,1M,16M,256M --patterns h2d,d2h --seconds 0.2 --rounds 5 --json $o/hot-loop.json > $o/hot-loop.txt 2>&1
echo "hot loop rc $?"; grep -E "threads, |cmt/" $o/hot-loop.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
