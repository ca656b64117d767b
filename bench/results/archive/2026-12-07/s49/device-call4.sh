#!/bin/sh
# Ran twice on one H100 (nvidia-h100-x1, 580.159.04), 08:23-08:25 UTC: call 4 (raw in call4/) timed the
# launch right after the free; call 5 (call5/; the probe as committed) 2 ms after it.
# Session 49's fourth call (carry [".deps"]): cmt-lab-register-wait (its new parts: a launch on a
# third stream while another thread unregisters under a spinning kernel; the program's next launch
# after a free that cmt's release thread finishes) without cmt, and under cmt hot with
# register_free_later 1 and 0. Does a free finished later move the GPU wait to the next CUDA call?
start=$(date +%s); o=$OUT/r; mkdir -p $o; b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release cmt-lab-register-wait > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; exit 1; }
echo "built at $(( $(date +%s) - start )) s"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
for m in none later now; do
  echo "== $m" >> $o/wait.txt
  case $m in
    none) timeout 60 $b/cmt-lab-register-wait --spin-ms 100 --reps 5 >> $o/wait.txt 2>&1 ;;
    later) CMT_REGISTER=hot CMT_REGISTER_FREE_LATER=1 timeout 60 $b/cmt run -- $b/cmt-lab-register-wait --spin-ms 100 --reps 5 >> $o/wait.txt 2>&1 ;;
    now) CMT_REGISTER=hot CMT_REGISTER_FREE_LATER=0 timeout 60 $b/cmt run -- $b/cmt-lab-register-wait --spin-ms 100 --reps 5 >> $o/wait.txt 2>&1 ;;
  esac
  echo "$m rc $? at $(( $(date +%s) - start )) s"
done
cat $o/wait.txt
