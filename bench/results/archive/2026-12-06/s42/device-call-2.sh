#!/bin/sh
# Ran on ca17ec6 plus the 2 MiB ring and ring-small-pages-lab.patch, on call 1's warm machine.
# Session 42, call 2. Carry [".deps"]. (1) The GPU tests call 1's 240 s did not reach (it ran ten,
# all passed); (2) issue 32's rows with the huge-page staging ring (loaders.py, default against
# cmt, alternating processes, every byte checked), as many rounds as the call leaves room for.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
echo "built at $(( $(date +%s) - start )) s"
timeout 230 ctest --test-dir $b -R "^gpu_" -E "gpu_preload_app|gpu_driver_app|gpu_failidx|gpu_torch|gpu_cupy|gpu_jax|gpu_tune" --output-on-failure > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(( $(date +%s) - start )) s"; grep -E "Test +#|tests passed|Failed|\*\*\*" $o/gpu-tests.txt | head -20
pack
left=$(( 570 - ($(date +%s) - start) ))
CMT_CONFIGS_DIR= timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --hf --files \
  --deadline $(( left - 130 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; grep -v "^child" $o/loaders.txt | tail -30
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
