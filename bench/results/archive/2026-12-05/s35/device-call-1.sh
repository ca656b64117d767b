#!/bin/sh
# Session 35's first device call (a device was lent at 22:33 UTC, after the plan was written):
# parts 1 and 2 of device-call-plan.sh. Carry [".deps"].
#  1. issue 33's loop question (NOTES 77-78): cmt-lab-registered call by call on the main thread and
#     as cmt bench copy makes its copies (--thread fresh, --buffers malloc), and the benchmark's
#     loop with its median and first-copy figures: which of the two adds 1.3-4 us a copy.
#  2. register = auto (NOTES 78): cmt-lab-copied-few without cmt and under off, hot and auto,
#     processes alternating,
#     counts up to 100; the estimates auto learned (CMT_STATS hot_buffers.estimated_*).
#  3. the GPU tests that changed: gpu_bench_replay (version-4 traces), gpu_hot_safety under auto.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
b=build-gpu
for t in main fresh; do for buf in aligned malloc; do
  CMT_CONFIGS_DIR= CMT_REGISTER=hot timeout 60 $b/cmt run -- $b/cmt-lab-registered --sizes 64K,256K \
    --reps 3000 --thread $t --buffers $buf > $o/registered-$t-$buf.txt 2>&1
  echo "== thread $t buffers $buf rc $?"; grep -A1 -E "^(64K|256K)" $o/registered-$t-$buf.txt
done; done
CMT_CONFIGS_DIR= CMT_REGISTER=hot timeout 60 $b/cmt run -- $b/cmt bench copy --threads 1 --stream own \
  --sizes 64K,256K --patterns h2d,d2h --seconds 0.2 --rounds 5 --json $o/hot-small.json > $o/hot-small.txt 2>&1
echo "bench rc $?"; grep -E "threads, |cmt/|median|first" $o/hot-small.txt | head -20
pack
for round in 1 2; do for m in none off hot auto; do
  echo "== $m round $round" >> $o/copied-few.txt
  disable=0; reg=$m; [ $m = none ] && { disable=1; reg=off; }
  CMT_CONFIGS_DIR= CMT_DISABLE=$disable CMT_REGISTER=$reg CMT_STATS=$o/copied-few-$m-$round.json \
    timeout 90 $b/cmt run -- $b/cmt-lab-copied-few --reps 9 --counts 1,2,3,5,10,30,100 \
    >> $o/copied-few.txt 2>&1
done; done
tail -60 $o/copied-few.txt
python3 -c "import json,sys; [print(f, {k: v for k, v in json.load(open(f))['hot_buffers'].items() if 'estim' in k or k == 'registrations'}) for f in sys.argv[1:]]" $o/copied-few-auto-*.json
pack
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
