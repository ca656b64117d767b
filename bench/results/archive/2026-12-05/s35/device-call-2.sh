#!/bin/sh
# Session 35's second device call: register = auto's copied-few again after the prior's fix, part 3
# of device-call-plan.sh (the GPU tests that changed, the
# safety suite under auto on the GPU), and offloaded inference with auto beside staged and hot.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail $o/build.txt; pack; exit 1; }
b=build-gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# auto with the 50 GB/s prior (59d0e7e), beside off and hot, processes alternating.
for m in off hot auto; do
  echo "== $m" >> $o/copied-few.txt
  CMT_CONFIGS_DIR= CMT_REGISTER=$m CMT_STATS=$o/copied-few-$m.json timeout 60 $b/cmt run -- \
    $b/cmt-lab-copied-few --reps 9 --counts 1,2,3,5,10,30,100 >> $o/copied-few.txt 2>&1
done
python3 -c "import json,sys; [print(f, {k: v for k, v in json.load(open(f))['hot_buffers'].items() if 'estim' in k or k == 'registrations'}) for f in sys.argv[1:]]" $o/copied-few-auto.json
pack
(cd $b && timeout 120 ctest -R "gpu_bench_replay|RegisterC" --output-on-failure > $o/ctest.txt 2>&1); echo "ctest rc $?"; tail -5 $o/ctest.txt
for m in hot auto; do
  HOT_SAFETY_REGISTER=$m HOT_SAFETY_JOBS=2 timeout 150 tests/hot_safety.sh $b/cmt $b/tests/cmt_hot_safety_gpu 3000 2 gpu > $o/hot-safety-$m.txt 2>&1
  echo "hot safety $m rc $?"; tail -4 $o/hot-safety-$m.txt
done
pack
CMT_CONFIGS_DIR= timeout 200 python3 bench/workloads/offload.py $b/cmt --rounds 1 --passes 20 \
  --modes staged,hot,pinned --mode auto:hot:CMT_REGISTER=auto --json $o/offload.json > $o/offload.txt 2>&1
echo "offload rc $?"; tail -15 $o/offload.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
