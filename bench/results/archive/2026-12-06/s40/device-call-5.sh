#!/bin/sh
# Session 40, call 5. Carry [".deps"]. Issue 32's loaders with each timed call's window kept beside
# its recorded trace (loaders.py --record now writes NAME.json), the default path recorded too
# (mode off: CMT_DISABLE=1 under cmt run --record), and bench/lab/load_bounds.py on each trace:
# what each call would take with its copies free, or at the link's rate.
start=$(date +%s)
o=$OUT/r; mkdir -p $o/rec
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
echo "built at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= timeout 420 python3 bench/workloads/loaders.py $b/cmt --rounds 2 --hf --files-only \
  --mode off:CMT_DISABLE=1 --deadline 200 --record $o/rec --workdir /tmp/cmt-loaders \
  --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; tail -14 $o/loaders.txt
for t in $o/rec/*.tsv; do python3 bench/lab/load_bounds.py $t > ${t%.tsv}.bounds.txt 2>&1; cat ${t%.tsv}.bounds.txt; done
gzip $o/rec/*.tsv
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
