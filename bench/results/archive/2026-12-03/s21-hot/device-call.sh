#!/bin/sh
# session 21's device call (the H200 could be had once at most): build; the hot buffers' safety
# suite on the GPU (3 seeds x 5000 random operations under register = hot, every byte checked; the
# program registering its own buffers with no cmt must see stale pages); the same buffer copied in
# a loop (cmt bench copy --threads 1, own stream, 64 KiB..256 MiB, each way), staged cmt and hot
# cmt in alternating processes, each beside default and pinned, 3 rounds in each; two threads
# one each way at once; offloaded inference under accelerate's cpu_offload, default / staged /
# hot / pinned, logits compared, one recorded hot run
o=$OUT/r; mkdir -p $o; git log --oneline -1 > $o/commit.txt 2>/dev/null
nproc > $o/nproc.txt; nvidia-smi > $o/nvidia-smi.txt 2>&1; uname -r > $o/kernel.txt
python3 -c "import accelerate, transformers, torch; print(accelerate.__version__, transformers.__version__, torch.__version__)" > $o/versions.txt 2>&1
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; cd $OUT && tar czf r.tgz r; exit 1; }
date
CMT_CONFIGS_DIR= timeout 100 tests/hot_safety.sh build-gpu/cmt build-gpu/tests/cmt_hot_safety_gpu 5000 3 gpu \
  > $o/hot-safety.txt 2>&1
tail -8 $o/hot-safety.txt
date
for mode in staged hot; do
  reg=off; [ $mode = hot ] && reg=hot
  CMT_REGISTER=$reg CMT_CONFIGS_DIR= CMT_STATS=$o/loop-$mode.stats.json timeout 70 build-gpu/cmt run -- \
    build-gpu/cmt bench copy --threads 1 --stream own --sizes 64K,256K,1M,16M,256M \
    --patterns h2d,d2h --seconds 0.2 --rounds 3 --json $o/loop-$mode.json > $o/loop-$mode.txt 2>&1
  tail -14 $o/loop-$mode.txt
done
for mode in staged hot; do
  reg=off; [ $mode = hot ] && reg=hot
  CMT_REGISTER=$reg CMT_CONFIGS_DIR= timeout 30 build-gpu/cmt run -- \
    build-gpu/cmt bench copy --threads 2 --stream own --sizes 256M --patterns both \
    --seconds 0.2 --rounds 3 --json $o/both-$mode.json > $o/both-$mode.txt 2>&1
  tail -5 $o/both-$mode.txt
done
date
CMT_CONFIGS_DIR= timeout 170 python3 bench/workloads/offload.py build-gpu/cmt --rounds 1 --passes 5 \
  --record $o/rec --json $o/offload.json > $o/offload.txt 2>&1
tail -10 $o/offload.txt
build-gpu/cmt trace show $o/rec/offload-hot.tsv > $o/rec/offload-hot.show.txt 2>&1
head -8 $o/rec/offload-hot.show.txt
date
cd $OUT && tar czf r.tgz r && rm -rf r
