#!/bin/sh
# cuMemcpyBatchAsync's failIdx (CUDA 12.8's form) under cmt is what CUDA writes without it, on
# success and on failure (failidx_app.cpp's cases), and cmt took the large copies.
# Exit 77 without a GPU.
set -u
lib=$1
app=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$app" > "$tmp/cuda.txt" 2>&1; rc=$?
[ $rc -eq 77 ] && { cat "$tmp/cuda.txt"; exit 77; }
[ $rc -eq 127 ] && { echo "no CUDA driver: skipped"; exit 77; }
[ $rc -eq 0 ] || { echo "FAIL: without cmt, exit $rc"; cat "$tmp/cuda.txt"; exit 1; }
LD_PRELOAD=$lib CMT_STATS=$tmp/stats.json "$app" > "$tmp/cmt.txt" 2>&1; rc=$?
echo "CUDA alone:"; cat "$tmp/cuda.txt"
echo "under cmt:"; cat "$tmp/cmt.txt"
[ $rc -eq 0 ] || { echo "FAIL: under cmt, exit $rc"; exit 1; }
cmp -s "$tmp/cuda.txt" "$tmp/cmt.txt" || { echo "FAIL: failIdx or results differ"; exit 1; }
python3 - "$tmp/stats.json" <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))
batch = s["taken_via"]["batch"]
print(f"cmt took {batch} copies of the batches")
sys.exit(0 if batch >= 7 else 1)  # all-large 3, mixed 2, bad-large 2 at least
PY
echo "ok: failIdx as CUDA's on success and on failure"
