#!/bin/sh
# Session 34's fourth call, on the H200 that call 3 got: issue 33's both-ways rows and CPU per GB
# (hot against staged against pinned), then issue 32's from_pretrained (second call) default vs cmt.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
[ -x build-gpu/cmt ] || { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 && cmake --build build-gpu > $o/build.txt 2>&1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for reg in hot off; do
  CMT_CONFIGS_DIR= CMT_REGISTER=$reg timeout 70 build-gpu/cmt run -- build-gpu/cmt bench copy --threads 2 \
    --sizes 1M,16M,256M --patterns both --seconds 0.25 --rounds 4 --json $o/both2-$reg.json > $o/both2-$reg.txt 2>&1
  echo "threads 2 $reg rc $?"
  CMT_CONFIGS_DIR= CMT_REGISTER=$reg timeout 60 build-gpu/cmt run -- build-gpu/cmt bench copy --threads 8 \
    --sizes 16M,256M --patterns both --seconds 0.25 --rounds 4 --json $o/both8-$reg.json > $o/both8-$reg.txt 2>&1
  echo "threads 8 $reg rc $?"; pack
done
grep -E "x [0-9] threads|default|cmt |pinned" $o/both2-hot.txt $o/both8-hot.txt $o/both2-off.txt $o/both8-off.txt | cut -c1-190
echo "at $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout $(( 470 - ($(date +%s) - start) )) python3 bench/workloads/loaders.py build-gpu/cmt \
  --rounds 3 --hf-only --deadline $(( 440 - ($(date +%s) - start) )) --json $o/hf.json > $o/hf.txt 2>&1
echo "hf rc $?"; grep -v "Writing" $o/hf.txt | tail -10
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
