#!/bin/sh
# Not run: no machine came for 85 minutes, and the refused starts left too little device time;
# device-call-1b.sh (its parts 2 and 3) and device-calls-2-3.sh (parts 4 and 5, by hand) ran instead.
# Session 36's first device call: register = auto with copies timed on their streams
# (interpose/interposer/stream_timer.h; NOTES 79). Carry [".deps"].
#  1. the unit tests that changed, on the GPU build (StreamTimer, RegisterCosts, RegisterCache);
#  2. cmt-lab-copied-few under off, hot and auto (processes alternating, counts to 100), and what
#     auto learned (CMT_STATS hot_buffers: estimates, staged_copies_timed, registrations);
#  3. offloaded inference: staged, hot, pinned and auto side by side, logits compared;
#  4. the offloaded inference recorded under staging (trace version 4), `cmt trace show` of it;
#  5. the GPU safety suite under auto (2 seeds x 1500 operations).
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail $o/build.txt; pack; exit 1; }
b=build-gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "built at $(( $(date +%s) - start )) s"
$b/tests/cmt_cpu_tests --gtest_filter='StreamTimer*:RegisterCosts*:RegisterCache*' > $o/unit.txt 2>&1; echo "unit rc $?"; tail -2 $o/unit.txt
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
pack
CMT_CONFIGS_DIR= CMT_REGISTER=auto CMT_STATS=$o/offload-auto-stats.json timeout 100 $b/cmt run -v -- \
  python3 bench/workloads/offload.py --child hot 20 > $o/offload-auto-v.txt 2>&1
echo "offload auto -v rc $?"; grep -E "at exit|hot buffers" $o/offload-auto-v.txt | tail -3
echo "offload done at $(( $(date +%s) - start )) s"
pack
# Issue 32: the version-4 trace of the offloaded inference under cmt's staging, and what
# `cmt trace show` says of its host buffers copied again.
mkdir -p $o/rec
CMT_CONFIGS_DIR= CMT_REGISTER=off timeout 100 $b/cmt run --record $o/rec/offload-off.tsv -- \
  python3 bench/workloads/offload.py --child hot 10 > $o/rec/offload-off.out 2>&1
echo "record rc $?"
$b/cmt trace show $o/rec/offload-off.tsv > $o/rec/offload-off.show.txt 2>&1
grep -A8 -i "copied again" $o/rec/offload-off.show.txt | head -12
gzip $o/rec/offload-off.tsv
pack
HOT_SAFETY_REGISTER=auto HOT_SAFETY_JOBS=2 timeout 150 tests/hot_safety.sh $b/cmt $b/tests/cmt_hot_safety_gpu 1500 2 gpu > $o/hot-safety-auto.txt 2>&1
echo "hot safety auto rc $?"; tail -4 $o/hot-safety-auto.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
