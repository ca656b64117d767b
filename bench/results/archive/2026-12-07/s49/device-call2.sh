#!/bin/sh
# Session 49's second call (carry [".deps"]), on 0be9bed (fread past 2 GiB fixed): gpu_host_copy
# (its reads_all run now reads 2 GiB + 3 MiB with pread and fread, against the real driver), then
# bench/lab/mapped_states.py (NOTES 95), whose cmt processes all stopped in call 1 at that fread.
# T: seconds this call may take (default 480).
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
el() { echo $(( $(date +%s) - start )); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; (cd $OUT && tar czf r.tgz r); exit 1; }
echo "built at $(el) s"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
timeout 90 ctest --test-dir $b --output-on-failure -R 'gpu_host_copy' > $o/gpu-tests.txt 2>&1
echo "gpu_host_copy rc $? at $(el) s"; grep -E "reads_all|tests passed|Failed" $o/gpu-tests.txt | cut -c1-300
export CMT_CONFIGS_DIR=
left=$(( ${T:-480} - $(el) ))
timeout $left python3 bench/lab/mapped_states.py $b/cmt --rounds 14 --iters 3 --deadline $(( left - 30 )) \
  --record $o/rec --json $o/states.json > $o/states.txt 2>&1
echo "states rc $? at $(el) s"; cut -c1-260 $o/states.txt | tail -40
(cd $OUT && tar czf r.tgz r && rm -rf r)
