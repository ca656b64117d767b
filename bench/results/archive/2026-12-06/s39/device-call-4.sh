#!/bin/sh
# Session 39, call 4. Carry [".deps"]. cmt now hooks the runtime's and driver's synchronize calls
# (forwarded untouched) and keeps them in a recorded trace (version 6). On the GPU:
#  1. the whole build, and the GPU tests (PyTorch, CuPy, JAX, the driver app, the replay...);
#  2. the offloaded inference recorded, staged (one process, pageable weights, CMT_REGISTER=off):
#     `cmt trace show` (its waits) and offload_passes.py (each pass's waits and own work);
#  3. `cmt bench replay` of that trace, default / cmt / pinned, now waiting where the program did.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
echo "built at $(( $(date +%s) - start )) s"
timeout 240 ctest --test-dir $b -R "^gpu_" --output-on-failure > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(( $(date +%s) - start )) s"; grep -E "tests passed|Failed|\*\*\*|Skipped|Not Run" $o/gpu-tests.txt | head -20
pack
CMT_CONFIGS_DIR= CMT_REGISTER=off timeout 90 $b/cmt run --record $o/staged.tsv -- python3 bench/workloads/offload.py --child staged 6 \
  > $o/child.json 2> $o/child.err
echo "record rc $? at $(( $(date +%s) - start )) s"; tail -c 300 $o/child.json; echo
$b/cmt trace show $o/staged.tsv > $o/show.txt 2>&1; grep -A2 "^waits\|^in copies\|^gaps" $o/show.txt
python3 bench/lab/offload_passes.py $o/staged.tsv > $o/passes.txt 2>&1; tail -3 $o/passes.txt
pack
left=$(( 560 - ($(date +%s) - start) ))
[ $left -gt 60 ] && CMT_CONFIGS_DIR= timeout $left $b/cmt bench replay $o/staged.tsv --rounds 2 --json $o/replay.json > $o/replay.txt 2>&1
echo "replay rc $?"; tail -12 $o/replay.txt
gzip -f $o/staged.tsv
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
