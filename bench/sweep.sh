#!/bin/sh
# Runs cmt-bench-copy over a few engine configurations (threads/chunk/slots) and prints one line
# per configuration, size and direction: the raw material for picking defaults. Usage:
#   bench/sweep.sh BUILD_DIR OUT_DIR "T:CHUNK:SLOTS ..." [SIZES] [REPS]
set -eu
build=$1; out=$2; configs=$3; sizes=${4:-16M,64M,1G}; reps=${5:-5}
mkdir -p "$out"
for c in $configs; do
  t=${c%%:*}; rest=${c#*:}; chunk=${rest%%:*}; slots=${rest#*:}
  CMT_THREADS=$t CMT_CHUNK_BYTES=$chunk CMT_SLOTS=$slots \
    "$build/cmt-bench-copy" --sizes "$sizes" --reps "$reps" --json "$out/sweep-$t-$chunk-$slots.json" \
    | awk -v c="$c" '/GB\/s/ {print c, $0}'
done
