#!/bin/sh
# session 21's third device call (what budget was left, about 370 s): build; the same buffer copied
# in a loop, staged cmt then hot cmt (a covered copy now goes to the DMA with no pointer queries),
# each beside default and pinned, 3 rounds; two threads one each way at once, hot. Results go
# straight to $OUT (a cut-short call still returns them)
o=$OUT; git log --oneline -1 > $o/commit.txt 2>/dev/null
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > /dev/null 2>&1 &&
  cmake --build build-gpu --target cmt_cli cmt cmt_engine_library cmt_release cmt_host cmt_host_avx2 cmt-bench-copy cmt-bench-concurrent > /dev/null 2>&1 || exit 1
date
for mode in hot staged; do
  reg=off; [ $mode = hot ] && reg=hot
  CMT_REGISTER=$reg CMT_CONFIGS_DIR= CMT_STATS=$o/loop-$mode.stats.json timeout 70 build-gpu/cmt run -- \
    build-gpu/cmt bench copy --threads 1 --stream own --sizes 64K,256K,1M,16M,256M \
    --patterns h2d,d2h --seconds 0.2 --rounds 3 --json $o/loop-$mode.json > $o/loop-$mode.txt 2>&1
  grep -E "^[0-9]+[KMG] x|cmt/default" $o/loop-$mode.txt | paste - -
done
CMT_REGISTER=hot CMT_CONFIGS_DIR= timeout 30 build-gpu/cmt run -- \
  build-gpu/cmt bench copy --threads 2 --stream own --sizes 256M --patterns both \
  --seconds 0.2 --rounds 3 > $o/both-hot.txt 2>&1
tail -5 $o/both-hot.txt
date
