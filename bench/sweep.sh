#!/bin/sh
# Runs cmt-bench-copy over a few engine configurations (threads/chunk/slots[/idle spin us]) and
# prints one line per configuration, size and direction: the raw material for picking defaults.
#   bench/sweep.sh BUILD_DIR OUT_DIR "T:CHUNK:SLOTS[:SPIN_US] ..." [SIZES] [REPS]
set -eu
build=$1; out=$2; configs=$3; sizes=${4:-16M,64M,1G}; reps=${5:-5}
mkdir -p "$out"
for c in $configs; do
  IFS=: read -r t chunk slots spin <<EOF2
$c
EOF2
  CMT_THREADS=$t CMT_CHUNK_BYTES=$chunk CMT_SLOTS=$slots CMT_SPIN_US=${spin:-1000} \
    "$build/cmt-bench-copy" --sizes "$sizes" --reps "$reps" \
    --json "$out/sweep-$(echo "$c" | tr : -).json" \
    | awk -v c="$c" '/GB\/s/ {print c, $0}'
done
