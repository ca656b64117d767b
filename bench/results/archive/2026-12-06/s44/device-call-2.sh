#!/bin/sh
# Session 44, call 2 (carry [".deps"]). (1) The 16 MiB fread loop pass by pass (bench/lab/
# read_loop.py), default / cmt / CMT_SPIN_US=0 processes alternating, 2 rounds, with CMT_STATS:
# call 1's files child ran it at 7.8-8.2 GB/s under spin 0 in every round and at 9.9-18.3 built in,
# where spin 0 kept every other file loader's speed at half the CPU; read time against the rest
# says which side loses. (2) cmt-lab-registered --thread block --neighbour default|none with
# CMT_STATS: call 1's 256K H2D hot copies ran at 0.61-0.76 of pinned there and only there. (3) The
# hot loop and the lab recorded (CMT_RECORD): each hot copy's time inside the hook against the
# time between copies, beside the pinned copies of the same process.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
f=/tmp/s44-read.bin
python3 -c "
import os
with open('$f', 'wb') as out:
    for _ in range(32): out.write(os.urandom(64 << 20))"
cat $f > /dev/null
echo "file ready at $(( $(date +%s) - start )) s"
for r in 1 2; do
  for m in default:CMT_DISABLE=1 cmt:CMT_LOG=warn spin0:CMT_SPIN_US=0; do
    n=${m%%:*}
    env ${m#*:} CMT_STATS=$o/rl-stats-$n-$r.json $b/cmt run -- python3 bench/lab/read_loop.py $f \
      --chunk 16 --passes 8 --fread --between none > $o/rl-$n-$r.txt 2>&1
    echo "== read_loop 16 MiB fread, $n, round $r"; grep -E "^pass" $o/rl-$n-$r.txt | tr '\n' ';' | sed 's/;pass/\n pass/g'; echo
  done
done
pack
for n in default none; do
  CMT_STATS=$o/lab-stats-$n.json CMT_REGISTER=hot $b/cmt run -- $b/cmt-lab-registered --sizes 64K,256K \
    --reps 5000 --block 5000 --thread block --buffers malloc --neighbour $n > $o/lab-block-$n.txt 2>&1
  echo "== lab block $n"; grep -E "^(64K|256K)|mean|check" $o/lab-block-$n.txt
done
CMT_RECORD=$o/lab-%p.trace CMT_REGISTER=hot $b/cmt run -- $b/cmt-lab-registered --sizes 64K \
  --reps 5000 --block 5000 --thread block --buffers malloc --neighbour default > $o/lab-rec.txt 2>&1
CMT_RECORD=$o/loop-%p.trace CMT_REGISTER=hot $b/cmt bench copy --threads 1 --stream own --sizes 64K \
  --patterns h2d --seconds 0.1 --rounds 2 > $o/loop-rec.txt 2>&1
echo "== recorded"; grep -E "^(64K)|check" $o/lab-rec.txt; grep -E "x 1 threads|^  (cmt|pinned) " $o/loop-rec.txt
for t in $o/*.trace; do $b/cmt trace show $t > $t.show.txt 2>&1; done
ls -la $o | tail -30
echo "done at $(( $(date +%s) - start )) s"
pack
