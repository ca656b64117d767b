#!/bin/sh
# Session 26's fourth device call (the third was cmt-lab-register-wait alone, run inline): build;
# the GPU tests on this session's code (bench/device_check.sh tests: every GPU test but the long
# safety and stress suites, which the first call ran); then the same buffer in a loop, hot and
# staged cmt beside CUDA's own path and pinned (cmt bench copy --threads 1, 5 rounds of 0.2 s
# windows). Results tarred after each step.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
sh bench/device_check.sh build-gpu $o tests
pack
echo "at $(( $(date +%s) - start )) s"
for reg in hot off; do
  CMT_CONFIGS_DIR= CMT_REGISTER=$reg timeout 70 build-gpu/cmt run -- build-gpu/cmt bench copy --threads 1 \
    --stream own --sizes 64K,256K,1M,16M,256M --patterns h2d,d2h --seconds 0.2 --rounds 5 \
    --json $o/loop-$reg.json > $o/loop-$reg.txt 2>&1
  echo "register=$reg"; grep -E "x 1 threads|cmt/pinned" $o/loop-$reg.txt
done
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
