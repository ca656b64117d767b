#!/bin/sh
# Session 52's first call (carry [".deps"]): several processes under cmt on one GPU at once.
#  1. gpu_bench_copy (with cmt bench copy --processes's own check);
#  2. cmt bench copy --processes 1,2,4,8 (64 MiB, each way and both, 1 s windows, 3 rounds):
#     default / cmt / pinned in step in every process, the built-in settings;
#  3. the same at 4 and 8 processes with CMT_SPIN_US=0, then CMT_THREADS=2 (is it contention?).
start=$(date +%s); o=$OUT/r; mkdir -p $o
el() { echo $(( $(date +%s) - start )); }
pack() { (cd $OUT && tar czf r.tgz r); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu > $o/build.txt 2>&1 ||
  { tail -30 $o/build.txt; pack; exit 1; }
echo "built at $(el) s"
(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; nproc) > $o/gpu.txt; cat $o/gpu.txt
export CMT_CONFIGS_DIR=
timeout 240 ctest --test-dir build-gpu --output-on-failure -R 'gpu_bench_copy' > $o/tests.txt 2>&1
echo "tests rc $? at $(el) s"; grep -E "tests passed|Failed|FAIL|ok:|skipped" $o/tests.txt | cut -c1-200
timeout 300 build-gpu/cmt bench copy --processes 1,2,4,8 --sizes 64M --seconds 1 --rounds 3 \
  --json $o/procs.json > $o/procs.txt 2>&1
echo "processes rc $? at $(el) s"; cat $o/procs.txt; pack
for v in CMT_SPIN_US=0 CMT_THREADS=2; do
  timeout 150 env $v build-gpu/cmt bench copy --processes 4,8 --patterns h2d,both --sizes 64M \
    --seconds 1 --rounds 2 --json $o/procs-$v.json > $o/procs-$v.txt 2>&1
  echo "$v rc $? at $(el) s"; grep -v "^cmt-bench" $o/procs-$v.txt; pack
done
(cd $OUT && tar czf r.tgz r && rm -rf r)
