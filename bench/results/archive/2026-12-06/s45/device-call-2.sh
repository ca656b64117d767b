#!/bin/sh
# Ran in session 46 (output: archive/2026-12-07/s46/call1/, lab/NOTES.md 92). Carry [".deps"].
# Where the 16 MiB staging loaders' slow state goes (call 1 found it outside the reads: the time
# between them doubled, 106-121 ms per 2.2 GB against 58-69, while the host leg's threads were off
# their cores ~37% of the scenario against 5-10%: NOTES 91). The file children now time each copy
# from the pinned buffer (its synchronize included) and the making of the GPU tensor and the
# buffer, and count each thread name's context switches (a copy thread napping through every gap
# switches once a read). Modes: default, cmt, nowake (CMT_WAKE_AHEAD=0: the threads never nap on a
# guessed gap, they spin spin_us after every job): if the slow state is the threads napping through
# the DMAs, nowake never falls into it. As many rounds as T seconds allow.
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu  # T: seconds in all (560)
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
echo "built at $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
left=$(( ${T:-560} - ($(date +%s) - start) ))
timeout $left python3 bench/workloads/loaders.py $b/cmt --rounds 5 --files-only \
  --mode nowake:CMT_WAKE_AHEAD=0 \
  --deadline $(( left - 30 )) --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $? at $(( $(date +%s) - start )) s"; grep -v "^child" $o/loaders.txt | grep -E "pinned|checks"
python3 bench/results/archive/2026-12-06/s45/staging_rows.py $o/loaders.json
pack
