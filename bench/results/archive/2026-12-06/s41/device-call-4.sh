#!/bin/sh
# Session 41, call 4. Carry [".deps"]. Issue 32's rows at HEAD (the tree as committed: no lab patch),
# default against cmt with the built-in defaults, in alternating processes, every byte checked:
# loaders.py's copy scenarios (mapped-1/4/8, resident-1/4/8, gap-1ms, pinned), from_pretrained and
# the file loaders, as many rounds as fit (--deadline), with CPU s/GB.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt; git log --oneline -1
echo "built at $(( $(date +%s) - start )) s"
left=$(( 560 - ($(date +%s) - start) ))
CMT_CONFIGS_DIR= timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --hf --files \
  --deadline $(( left - 130 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; grep -v "^child" $o/loaders.txt | tail -30
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
