#!/bin/sh
# Session 49's third call (carry [".deps"]), on 0be9bed: loaders.py --files-only, default and cmt
# alternating, as many rounds as fit: do the mapped loaders' dips (NOTES 95: 10 of 28 cmt
# processes in s46/s48) recur in loaders.py's file children, where mapped_states.py (call 2, 14
# cmt processes) saw none? T: seconds this call may take (default 300).
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
el() { echo $(( $(date +%s) - start )); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; (cd $OUT && tar czf r.tgz r); exit 1; }
echo "built at $(el) s"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
left=$(( ${T:-300} - $(el) ))
timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 8 --files-only --deadline $(( left - 20 )) \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(el) s"; cut -c1-330 $o/loaders.txt | tail -40
(cd $OUT && tar czf r.tgz r && rm -rf r)
