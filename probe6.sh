#!/bin/sh
# session 10, device call 6: final measurements at c2aa667+
B=build-gpu; R=/tmp/r; mkdir -p $R
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $R/build.log 2>&1 && cmake --build $B >> $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
export CMT_CONFIGS_DIR=
git log --oneline -1 > $R/commit.txt 2>&1
ctest --test-dir $B -R "GpuEngine|gpu_bench_copy|gpu_tune" --output-on-failure > $R/ctest.log 2>&1; grep -E "tests passed|Failed" $R/ctest.log
export CMT_THRESHOLD=256K CMT_D2H_THRESHOLD=64K
S=4K,16K,32K,64K,128K,256K,512K,1M,2M,4M,16M,64M,256M,1G
timeout 150 $B/cmt bench copy --reps 10 --sizes $S --json $R/sweep-warm.json --plot $R/sweep-warm.svg > $R/sweep-warm.txt 2>&1; grep plain $R/sweep-warm.txt | awk '{print $2,$3,$5,$9,$13,$17}'
timeout 100 $B/cmt bench copy --reps 10 --gap-us 3000 --sizes 4K,16K,64K,128K,256K,512K,1M,2M,4M,16M --json $R/sweep-cold.json --plot $R/sweep-cold.svg > $R/sweep-cold.txt 2>&1; grep plain $R/sweep-cold.txt | awk '{print $2,$3,$5,$9,$13,$17}'
timeout 80 $B/cmt bench copy --threads 1 --sizes 64K,128K,256K,512K,1M,4M,16M --patterns h2d,d2h --seconds 0.25 --rounds 2 --json $R/loop-hot.json > $R/loop-hot.txt 2>&1; grep -E "x 1 threads|cmt/default" $R/loop-hot.txt | paste - - | awk '{print $1,$5,$7,$9}'
unset CMT_THRESHOLD CMT_D2H_THRESHOLD
for i in 1 2 3; do /usr/bin/time -f "wall %e s" timeout 60 $B/cmt tune --search instant -o $R/instant$i.toml > $R/instant$i.txt 2>&1; grep -E "instant search|wall|model|threshold:|confirm" $R/instant$i.txt; done
timeout 150 python3 bench/compare.py $B/cmt-bench-copy --sizes 4M,16M,64M,256M,1G --reps 5 --rounds 3 --versus default "instant:CMT_PROFILE=$R/instant3.toml" "full:CMT_PROFILE=$PWD/bench/results/2026-12-01-h200-tune-full-f4c9363.toml" builtin --json $R/instant-vs-full.json > $R/instant-vs-full.txt 2>&1; cat $R/instant-vs-full.txt
tar czf $OUT/results.tgz -C $R .
