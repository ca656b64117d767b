#!/bin/sh
# Session 47 got no machine; run in session 48 as its call 1 (raw in ../s48/call1/). Carry [".deps"].
# The build with read-store-lab-v2.patch applied on the device only. CMT_LAB_READ_STORE: unset, the
# rule built in since session 47 (reads into CUDA host memory, and any of 8 MiB or more, through the
# slots, streamed out; smaller reads into ordinary memory straight into the buffer); stream, every
# read through the slots (session 46's rule); cached, every read through the slots, copied out with
# ordinary stores; direct, no read through the slots (before session 46).
# (1) The CPU read tests, built-in rule. (2) bench/lab/read_consume.py (lab/NOTES.md 93): reads into
# ordinary memory, each chunk consumed by CPU code (numpy sum, zlib.crc32) before the next read,
# default / cmt / stream / direct / cached, 3 rounds, chunks 1, 4, 16 MiB. (3) loaders.py
# --files-only, default / cmt / stream, as many rounds as fit (3 asked): the built-in rule's file
# rows beside session 46's. T: the seconds this call may take (560).
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
p=bench/results/archive/2026-12-07/s47/read-store-lab-v2.patch
git apply $p > $o/patch.txt 2>&1 || patch -p1 < $p >> $o/patch.txt 2>&1 || { cat $o/patch.txt; exit 1; }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt; lscpu | grep -E "Model name|L2|L3" | tee $o/cpu.txt
$b/tests/cmt_cpu_tests --gtest_filter='HostCopier*:ForEach*:HostLeg*' > $o/cpu-tests.txt 2>&1; echo "cpu tests rc $?"; tail -1 $o/cpu-tests.txt
export CMT_CONFIGS_DIR=
timeout 200 python3 bench/lab/read_consume.py $b/cmt --rounds 3 --deadline 170 --chunks 1,4,16 \
  --mode stream:CMT_LAB_READ_STORE=stream --mode direct:CMT_LAB_READ_STORE=direct \
  --mode cached:CMT_LAB_READ_STORE=cached --json $o/consume.json > $o/consume.txt 2>&1
echo "consume rc $? at $(( $(date +%s) - start )) s"; grep -v "^round" $o/consume.txt; pack
left=$(( ${T:-560} - ($(date +%s) - start) ))
timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --files-only --mode stream:CMT_LAB_READ_STORE=stream \
  --deadline $(( left - 15 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | grep -E "GB|checks|pinned|load|open"
pack
