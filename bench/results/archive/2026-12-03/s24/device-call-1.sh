#!/bin/sh
# session 24's first device call: build; the GPU tests (gpu_structured_hot among them: cudart's
# 2D, 3D and array copies on buffers cmt registered); the hot safety stage (C suite 2 x 10000,
# CUDA's pointer attributes of a cmt registration); the weight-set lab. Results tarred after
# each stage so a timeout still brings them back.
o=$OUT/r; mkdir -p $o
git rev-parse HEAD > $o/tree.txt 2>/dev/null
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; cd $OUT && tar czf r.tgz r; exit 1; }
date
for stage in tests hotsafe weights; do
  bench/device_check.sh build-gpu $o $stage
  (cd $OUT && tar czf r.tgz r)
done
date
