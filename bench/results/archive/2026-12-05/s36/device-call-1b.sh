#!/bin/sh
# Session 36's device call, trimmed to what the budget left (device starts kept failing): the
# targets copied-few and offload need, register = auto with copies timed on their streams
# against off and hot, then offloaded inference staged / hot / pinned / auto. Carry [".deps"].
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release cmt-lab-copied-few > $o/build.txt 2>&1 ||
  { tail $o/build.txt; pack; exit 1; }
b=build-gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "built at $(( $(date +%s) - start )) s"
for m in off hot auto; do
  echo "== $m" >> $o/copied-few.txt
  CMT_CONFIGS_DIR= CMT_REGISTER=$m CMT_STATS=$o/copied-few-$m.json timeout 60 $b/cmt run -- \
    $b/cmt-lab-copied-few --reps 9 --counts 1,2,3,5,10,30,100 >> $o/copied-few.txt 2>&1
done
python3 -c "import json,sys; [print(f, {k: v for k, v in json.load(open(f))['hot_buffers'].items() if 'estim' in k or k in ('registrations', 'copies', 'staged_copies_timed')}) for f in sys.argv[1:]]" $o/copied-few-hot.json $o/copied-few-auto.json
pack
echo "copied-few done at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= timeout 200 python3 bench/workloads/offload.py $b/cmt --rounds 1 --passes 20 \
  --modes staged,hot,pinned --mode auto:hot:CMT_REGISTER=auto --json $o/offload.json > $o/offload.txt 2>&1
echo "offload rc $?"; tail -8 $o/offload.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
