#!/bin/sh
# Session 39, call 2. Carry [".deps"]. Does a blocking .to('cuda') synchronize in the offloaded
# inference, and where does a pass's time go when it does? offload.py --same-process now times
# the program inside Tensor.to (the copy call plus PyTorch's stream synchronize) and counts a
# pass's synchronizing calls; hot / pinned / default and staged / pinned / default, alternating.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
python3 -c "import torch, accelerate, transformers; print(torch.__version__, accelerate.__version__, transformers.__version__)" | tee $o/versions.txt
echo "built at $(( $(date +%s) - start )) s"
for reg in hot off hot off; do
  [ $(( $(date +%s) - start )) -gt 450 ] && break
  CMT_CONFIGS_DIR= timeout 100 python3 bench/workloads/offload.py $b/cmt --same-process --register $reg \
    --rounds 1 --passes 8 --json $o/same-$reg-$(date +%s).json > $o/same-$reg.txt 2>&1
  echo "register $reg rc $?"; cat $o/same-$reg.txt >> $o/same.txt; tail -12 $o/same-$reg.txt
  pack
done
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
