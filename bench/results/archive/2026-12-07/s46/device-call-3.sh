#!/bin/sh
# NOT RUN (session 46: too little device time left to start a machine). Carry [".deps"].
# The committed build (slots of 256 KiB built in): the CPU read tests on the device, then
# loaders.py --files-only, default against cmt, one round, every byte checked.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
$b/tests/cmt_cpu_tests --gtest_filter='HostCopier*:HostLeg*' > $o/cpu-tests.txt 2>&1; echo "cpu tests rc $?"
export CMT_CONFIGS_DIR=
left=$(( ${T:-150} - ($(date +%s) - start) ))
timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 1 --files-only \
  --deadline $(( left - 10 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | grep -E "GB|checks"
pack
