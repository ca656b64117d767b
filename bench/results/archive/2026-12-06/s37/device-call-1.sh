#!/bin/sh
# Session 37's first device call (issue 32: traces that say what the streams did; issue 33: auto
# weighing copies from registrations on their streams too). Carry [".deps"].
#  1. build what the calls need; the replay test (its version-5 case: the streams' recorded work
#     replayed as kernels) and the recorder's test on the GPU;
#  2. the offloaded inference recorded (trace version 5) staged, pinned and hot, `cmt trace show`
#     of each;
#  3. the staged trace replayed: default, cmt, pinned with the streams' work; cmt and pinned with
#     the streams idle (--gpu-work off, the replay before this); cmt under hot and auto.
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
timeout 120 ctest --test-dir $b -R "^gpu_bench_replay$|^record_trace$" --output-on-failure > $o/ctest.txt 2>&1
echo "ctest rc $?"; grep -E "tests passed|Passed|Failed|ok:" $o/ctest.txt | head -12
for m in off:hot:0 pinned:pinned:1 hot:hot:0; do
  name=${m%%:*}; rest=${m#*:}; child=${rest%%:*}; disable=${rest#*:}
  reg=$name; [ $name = pinned ] && reg=off
  CMT_CONFIGS_DIR= CMT_DISABLE=$disable CMT_REGISTER=$reg timeout 90 $b/cmt run --record $o/rec/offload-$name.tsv -- \
    python3 bench/workloads/offload.py --child $child 6 > $o/rec/offload-$name.out 2>&1
  echo "record $name rc $?"
  $b/cmt trace show $o/rec/offload-$name.tsv > $o/rec/offload-$name.show.txt 2>&1
  grep -A6 "on their streams" $o/rec/offload-$name.show.txt
done
pack
echo "recorded at $(( $(date +%s) - start )) s"
t=$o/rec/offload-off.tsv
CMT_CONFIGS_DIR= timeout 100 $b/cmt bench replay $t --rounds 3 --json $o/replay-on.json > $o/replay-on.txt 2>&1
cat $o/replay-on.txt
CMT_CONFIGS_DIR= timeout 60 $b/cmt bench replay $t --rounds 3 --modes cmt,pinned --gpu-work off > $o/replay-off.txt 2>&1
cat $o/replay-off.txt
for m in hot auto; do
  CMT_CONFIGS_DIR= CMT_REGISTER=$m timeout 40 $b/cmt bench replay $t --rounds 3 --modes cmt > $o/replay-$m.txt 2>&1
  tail -1 $o/replay-$m.txt
done
gzip $o/rec/*.tsv
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
