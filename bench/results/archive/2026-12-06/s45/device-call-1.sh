#!/bin/sh
# Session 45's first call (s44/device-call-next.sh, with loaders.py's file children now saying
# their reads' time and each thread's CPU: s45/read_threads.py prints them). Carry [".deps"].
# The spin cap on the GPU copy engine's pool alone (engine-spin-cap-lab.patch, applied on the
# device only: CMT_SPIN_THREADS, built in 0 = every thread spins, as now; the host leg's pool
# always spins as now, since session 44's cap on both pools cost the 16 MiB reads 22-25%, NOTES
# 90). cap4 (CMT_SPIN_THREADS=4) against the built-in: cmt bench copy 256K-64M both ways and
# the concurrent benchmark at 8 threads, processes alternating; then loaders.py --hf --files, as
# many rounds as fit. Keep it only if no row is slower beyond the spread and the CPU per GB drops.
start=$(date +%s); o=$OUT/r;  # T: seconds in all (560)
 mkdir -p $o; b=build-gpu
pack() { (cd $OUT && tar czf r.tgz r); }
p=bench/results/archive/2026-12-06/s44/engine-spin-cap-lab.patch
{ git apply $p 2>/dev/null || patch -p1 < $p; } > $o/patch.txt 2>&1 || { cat $o/patch.txt; exit 1; }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
for r in 1 2; do
  for m in all:CMT_LOG=warn cap4:CMT_SPIN_THREADS=4; do
    n=${m%%:*}
    env ${m#*:} $b/cmt bench copy --sizes 256K,1M,4M,16M,64M --reps 10 --json $o/copy-$n-$r.json \
      > $o/copy-$n-$r.txt 2>&1
    env ${m#*:} $b/cmt bench copy --threads 8 --sizes 4M,16M --patterns h2d,d2h --seconds 0.5 \
      --rounds 2 > $o/conc-$n-$r.txt 2>&1
  done
done
python3 bench/results/archive/2026-12-06/s44/spin_rows.py $o all cap4 | tee $o/copy-rows.txt
grep -E "x 8 threads|^  cmt " $o/conc-*.txt
pack
left=$(( ${T:-560} - ($(date +%s) - start) ))
[ $left -gt 150 ] && timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 3 --hf --files \
  --mode cap4:CMT_SPIN_THREADS=4 --deadline $(( left - 40 )) \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | tail -24
python3 bench/results/archive/2026-12-06/s45/read_threads.py $o/loaders.json | grep 16M
pack
