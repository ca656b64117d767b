#!/bin/sh
# Session 40, call 2. Carry [".deps"]. Issue 32's file loaders against the copy threads' count:
# the host leg (memcpy into CUDA host memory, file reads into it) runs while the caller waits,
# so more threads there take no CPU from the caller. CMT_THREADS=12 and 15 against the built-in 8,
# alternating processes; and which code path safetensors' load_file(device='cuda') takes here.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
nproc; echo "built at $(( $(date +%s) - start )) s"
python3 - > $o/versions.txt 2>&1 <<'PY'
import inspect, torch, transformers, safetensors, safetensors.torch as st
print("torch", torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__)
print(st.__file__)
print(inspect.getsource(st.load_file))
import os
d = os.path.dirname(st.__file__)
print(sorted(os.listdir(d)))
PY
head -60 $o/versions.txt
CMT_CONFIGS_DIR= timeout 420 python3 bench/workloads/loaders.py $b/cmt --rounds 4 --files-only \
  --mode t12:CMT_THREADS=12 --mode t15:CMT_THREADS=15 --deadline 380 \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; tail -14 $o/loaders.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
