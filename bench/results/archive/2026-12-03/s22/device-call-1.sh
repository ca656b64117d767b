#!/bin/sh
# session 22's first device call: build; the registered-buffer lab (what a copy from registered
# memory costs against cudaMallocHost memory, and cmt's hot path in the same process); the
# Python safety suite's first runs (numpy, torch, bytearray, views, mmap under register = hot);
# issue 32's file loaders with session 20's reads (host_copy = all, readv), 2 rounds, recorded.
o=$OUT/r; mkdir -p $o
nproc > $o/nproc.txt; nvidia-smi > $o/nvidia-smi.txt 2>&1; uname -r > $o/kernel.txt
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; cd $OUT && tar czf r.tgz r; exit 1; }
date
timeout 40 build-gpu/cmt-lab-registered --reps 3000 > $o/lab-plain.txt 2>&1; cat $o/lab-plain.txt
CMT_REGISTER=hot CMT_CONFIGS_DIR= CMT_STATS=$o/lab-hot.stats.json timeout 40 build-gpu/cmt run -- \
  build-gpu/cmt-lab-registered --reps 3000 > $o/lab-hot.txt 2>&1; cat $o/lab-hot.txt
date
CMT_CONFIGS_DIR= timeout 150 tests/hot_safety.sh build-gpu/cmt tests/hot_safety_torch.py 1500 2 gpu \
  > $o/hot-safety-torch.txt 2>&1
tail -12 $o/hot-safety-torch.txt
date
cd $OUT && tar czf r.tgz r && cd - > /dev/null
CMT_CONFIGS_DIR= timeout 300 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 2 --files-only \
  --mode all:CMT_HOST_COPY=all --record $o/rec --workdir /tmp/cmt-loaders --json $o/files.json \
  > $o/files.txt 2>&1
tail -14 $o/files.txt
for t in files-cmt files-all; do
  [ -f $o/rec/$t.tsv ] && build-gpu/cmt trace show $o/rec/$t.tsv > $o/rec/$t.show.txt 2>&1
done
date
cd $OUT && tar czf r.tgz r && rm -rf r
