#!/bin/sh
# Session 48, call 2 (carry [".deps"]). Where should a read into ordinary memory for the CPU start
# to stream? Call 1 (s47/device-call-next.sh) found direct reads beat streamed ones for the consumer
# at 16 MiB too, above the built-in 8 MiB. (1) read_consume.py, chunks 16, 32, 64, 256 MiB of a
# 512 MiB file: default / cmt (the built-in rule: all of these stream) / direct (lab patch v2).
# (2) loaders.py --hf-only, default / cmt, the built-in rule: from_pretrained rows for the
# committed build. T: the seconds this call may take (560).
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
p=bench/results/archive/2026-12-07/s47/read-store-lab-v2.patch
git apply $p > $o/patch.txt 2>&1 || { cat $o/patch.txt; exit 1; }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
timeout 230 python3 bench/lab/read_consume.py $b/cmt --rounds 3 --deadline 200 --chunks 16,32,64,256 \
  --mode direct:CMT_LAB_READ_STORE=direct --json $o/consume-big.json > $o/consume-big.txt 2>&1
echo "consume rc $? at $(( $(date +%s) - start )) s"; grep -v "^round" $o/consume-big.txt; pack
left=$(( ${T:-560} - ($(date +%s) - start) ))
timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --hf-only \
  --deadline $(( left - 15 )) --workdir /tmp/cmt-loaders --json $o/hf.json > $o/hf.txt 2>&1
echo "hf rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/hf.txt | tail -8
pack
