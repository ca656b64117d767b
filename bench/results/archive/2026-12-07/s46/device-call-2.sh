#!/bin/sh
# Session 46, call 2 (ran; output in call2/). Carry [".deps"]. The knob below existed only in the tree
# of this call (256 KiB slots are built in since; the knob is gone). The tree had CMT_LAB_READ_BOUNCE=KiB
# (engine/host/host_copier.cpp, ReadBounce): the host leg's file reads go through a per-thread bounce
# slot that stays in the core's cache and are streamed (non-temporal stores) into the program's
# buffer, so the program's DMA from it does not fetch lines dirty in 8 cores' caches (NOTES 84:
# 37-40 GB/s against 52-53 after one thread's read). Call 1 measured the copies from the 16 MiB
# pinned buffer at 0.49-0.53 ms median under cmt against 0.39 under default (NOTES 92).
# First the CPU read tests with the knob on (byte-exact, faults), then loaders.py --files-only:
# default, cmt, bounce256, bounce1024, as many rounds as T seconds allow (T: 400).
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
CMT_LAB_READ_BOUNCE=256 $b/tests/cmt_cpu_tests --gtest_filter='HostCopier*:HostLeg*' > $o/cpu-tests.txt 2>&1
echo "cpu tests (bounce 256) rc $?"; tail -1 $o/cpu-tests.txt
export CMT_CONFIGS_DIR=
left=$(( ${T:-400} - ($(date +%s) - start) ))
timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 4 --files-only \
  --mode bounce256:CMT_LAB_READ_BOUNCE=256 --mode bounce1024:CMT_LAB_READ_BOUNCE=1024 \
  --deadline $(( left - 30 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | grep -E "pinned|checks|GB/s"
python3 bench/results/archive/2026-12-06/s45/staging_rows.py $o/loaders.json | awk '{print $1,$2,$3,$4,$5,$9,$10,$15,$16}'
pack
