#!/bin/sh
# Session 45's second call: where the 16 MiB staging loaders' slow state goes (call 1 found it
# outside the reads: the time between them doubled, 106-121 ms per 2.2 GB against 58-69). The file
# children now time each copy from the pinned buffer (its synchronize included) and the making of
# the GPU tensor and the buffer; default and built-in cmt, as many rounds as T seconds allow.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu  # T: seconds in all (300)
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
left=$(( ${T:-300} - ($(date +%s) - start) ))
timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 4 --files-only \
  --deadline $(( left - 30 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | grep -E "pinned|checks"
python3 bench/results/archive/2026-12-06/s45/staging_rows.py $o/loaders.json
pack
