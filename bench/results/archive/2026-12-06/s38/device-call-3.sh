#!/bin/sh
# Session 38's third device call. Carry [".deps"].
#  1. issue 33: cmt-lab-copied-few under register = off and auto (auto now weighs copies from its
#     registrations by their streams' time too, 6016f8b), CMT_STATS of each;
#  2. the offloaded inference with auto and with hot, each in one process beside pinned and default
#     passes (offload.py --same-process --register auto|hot);
#  3. the replay test on the GPU (it now checks that hot registers, c31b3ed);
#  4. issue 32: the file loaders and from_pretrained recorded as version-5 traces (loaders.py
#     --files-only --hf --record), `cmt trace show` of each, and `cmt bench replay` of each.
start=$(date +%s)
o=$OUT/r; mkdir -p $o/rec
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release cmt-bench-replay \
    cmt-lab-copied-few cmt_fake_engine_app cmt_fake_engine_cuda > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
echo "built at $(( $(date +%s) - start )) s"
for m in off auto; do
  echo "== $m" >> $o/copied-few.txt
  CMT_CONFIGS_DIR= CMT_REGISTER=$m CMT_STATS=$o/copied-few-$m.json timeout 60 $b/cmt run -- \
    $b/cmt-lab-copied-few --reps 9 --counts 1,2,3,5,10,30,100 >> $o/copied-few.txt 2>&1
  echo "copied-few $m rc $?"
done
python3 -c "import json,sys; [print(f, {k: v for k, v in json.load(open(f))['hot_buffers'].items() if 'estim' in k or k in ('registrations', 'copies', 'staged_copies_timed')}) for f in sys.argv[1:]]" $o/copied-few-auto.json
pack
echo "copied-few done at $(( $(date +%s) - start )) s"
for r in auto hot; do
  CMT_CONFIGS_DIR= timeout 90 python3 bench/workloads/offload.py $b/cmt --same-process --register $r \
    --rounds 1 --passes 8 --json $o/same-$r.json > $o/same-$r.txt 2>&1
  echo "same $r rc $?"; grep -E "against pinned|ms a pass" $o/same-$r.txt
done
pack
echo "offload done at $(( $(date +%s) - start )) s"
timeout 90 ctest --test-dir $b -R "^gpu_bench_replay$" --output-on-failure > $o/ctest.txt 2>&1
echo "ctest rc $?"; grep -E "ok:|FAIL|Passed|Failed" $o/ctest.txt | head
pack
left=$(( 540 - ($(date +%s) - start) ))
CMT_CONFIGS_DIR= timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 1 --hf --files-only \
  --record $o/rec --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; tail -16 $o/loaders.txt
for t in $o/rec/*.tsv; do $b/cmt trace show $t > ${t%.tsv}.show.txt 2>&1; done
pack
for t in $o/rec/*.tsv; do
  left=$(( 560 - ($(date +%s) - start) ))
  [ $left -lt 20 ] && break
  CMT_CONFIGS_DIR= timeout $left $b/cmt bench replay $t --rounds 3 > ${t%.tsv}.replay.txt 2>&1
  echo "replay $t rc $?"; tail -5 ${t%.tsv}.replay.txt
done
gzip $o/rec/*.tsv
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
