#!/bin/sh
# One device run that re-measures what the open issues still need, within 10 minutes on the
# 1-GPU H200 machine: GPU tests, the copy sweep with built-in defaults (result files now carry
# cmt's version and the fingerprint), the workloads in two rounds, and DCP with CMT_LANES=2.
# usage: bench/device_check.sh BUILD_DIR OUT_DIR
set -u
build=$1
out=$2
mkdir -p "$out"
ctest --test-dir "$build" -R "gpu_|getproc|taken_once|dlsym" --output-on-failure > "$out/ctest.log" 2>&1
grep -E "tests passed|\(Failed\)" "$out/ctest.log"
CMT_CONFIGS_DIR= timeout 150 "$build/cmt" bench copy --reps 5 --json "$out/sweep.json" \
  --plot "$out/sweep.svg" > "$out/sweep.txt" 2>&1
tail -8 "$out/sweep.txt"
timeout 300 python3 "$(dirname "$0")/workloads/run_all.py" "$build/cmt" --rounds 2 \
  --json "$out/workloads.json" > "$out/workloads.txt" 2>&1
tail -8 "$out/workloads.txt"
CMT_LANES=2 timeout 60 python3 "$(dirname "$0")/workloads/run_all.py" "$build/cmt" --rounds 1 \
  --only dcp_save > "$out/dcp-lanes2.txt" 2>&1
tail -3 "$out/dcp-lanes2.txt"
