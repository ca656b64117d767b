#!/bin/sh
# NOT RUN (session 47: every start refused from 02:15 to 03:53 UTC, then the device time was spent). Its patch applies to fcd558f only; device-call-next.sh replaces it.
# Session 47, call 1 (carry [".deps"]). The build with read-store-lab.patch applied on the device only
# (CMT_LAB_READ_STORE: stream, the committed behaviour when unset; cached, the slot copied out with
# ordinary stores; direct, no slot: each stretch pread straight into the buffer, as before 5611af6).
# (1) The CPU read tests, committed behaviour. (2) bench/lab/read_consume.py: reads into ordinary
# memory, each chunk consumed by CPU code before the next read (NOTES 93), default / cmt / direct /
# cached / CMT_HOST_READS=pinned, 3 rounds. (3) loaders.py --files-only, default / cmt / cached,
# as many rounds as fit (3 asked): the committed build's file rows.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
p=bench/results/archive/2026-12-07/s47/read-store-lab.patch
git apply $p > $o/patch.txt 2>&1 || patch -p1 < $p >> $o/patch.txt 2>&1 || { cat $o/patch.txt; exit 1; }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt; nproc; lscpu | grep -E "Model name|L2|L3" | tee $o/cpu.txt
$b/tests/cmt_cpu_tests --gtest_filter='HostCopier*:HostLeg*' > $o/cpu-tests.txt 2>&1; echo "cpu tests rc $?"; tail -1 $o/cpu-tests.txt
export CMT_CONFIGS_DIR=
timeout 160 python3 bench/lab/read_consume.py $b/cmt --rounds 3 --deadline 130 --chunks 1,4,16 --mode direct:CMT_LAB_READ_STORE=direct \
  --mode cached:CMT_LAB_READ_STORE=cached --mode hostpinned:CMT_HOST_READS=pinned \
  --json $o/consume.json > $o/consume.txt 2>&1
echo "consume rc $? at $(( $(date +%s) - start )) s"; grep -v "^round" $o/consume.txt; pack
left=$(( ${T:-560} - ($(date +%s) - start) ))
timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --files-only --mode direct:CMT_LAB_READ_STORE=direct \
  --deadline $(( left - 15 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | grep -E "GB|checks|pinned|load|open"
pack
