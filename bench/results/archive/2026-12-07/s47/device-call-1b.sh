#!/bin/sh
# NOT RUN (session 47: too little device time left to start a machine). Applies to fcd558f only; device-call-next.sh replaces it.
# Session 47, call 1b (carry [".deps"]): device-call-1.sh cut to what 284 s of device time left could
# hold after the refused starts: the build with read-store-lab.patch, then read_consume.py only
# (default / cmt / direct / cached, 2 rounds, chunks 1, 4, 16 MiB).
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
p=bench/results/archive/2026-12-07/s47/read-store-lab.patch
git apply $p > $o/patch.txt 2>&1 || patch -p1 < $p >> $o/patch.txt 2>&1 || { cat $o/patch.txt; exit 1; }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt; lscpu | grep -E "Model name|L2|L3" | tee $o/cpu.txt
export CMT_CONFIGS_DIR=
timeout $(( ${T:-150} - ($(date +%s) - start) )) python3 bench/lab/read_consume.py $b/cmt --rounds 2 \
  --deadline $(( ${T:-150} - 20 - ($(date +%s) - start) )) --chunks 1,4,16 \
  --mode direct:CMT_LAB_READ_STORE=direct --mode cached:CMT_LAB_READ_STORE=cached \
  --json $o/consume.json > $o/consume.txt 2>&1
echo "consume rc $? at $(( $(date +%s) - start )) s"; grep -v "^round" $o/consume.txt; pack
