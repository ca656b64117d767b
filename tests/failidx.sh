#!/bin/sh
# cuMemcpyBatchAsync's failIdx (CUDA 12.8's form) under cmt is what CUDA writes without it, on
# success and on failure (failidx_app.cpp's cases, one process each: the result, failIdx, or the
# way the process ended), and cmt took the large copies of the good batches.
# Exit 77 without a GPU.
set -u
lib=$1
app=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$app" all-large > /dev/null 2>&1; rc=$?
[ $rc -eq 77 ] && { echo "no GPU or no CUDA 12.8 batch: skipped"; exit 77; }
[ $rc -eq 127 ] && { echo "no CUDA driver: skipped"; exit 77; }
fails=0
for c in all-large mixed freed zero-size bad-address no-copies; do
  cuda=$("$app" $c 2>&1); cuda_rc=$?
  under=$(LD_PRELOAD=$lib CMT_STATS=$tmp/$c.json "$app" $c 2>&1); cmt_rc=$?
  echo "CUDA alone: $cuda (exit $cuda_rc)"
  echo "under cmt:  $under (exit $cmt_rc)"
  if [ "$cuda" != "$under" ] || [ $cuda_rc -ne $cmt_rc ]; then
    echo "FAIL $c: differs"; fails=$((fails + 1))
  fi
done
python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
taken = {c: json.load(open(f"{sys.argv[1]}/{c}.json"))["taken_via"]["batch"]
         for c in ("all-large", "mixed")}
print(f"cmt took the batches' large copies: {taken}")
sys.exit(0 if taken["all-large"] == 3 and taken["mixed"] == 2 else 1)
PY
[ $fails -eq 0 ] || { echo "FAIL: $fails case(s)"; exit 1; }
echo "ok: failIdx as CUDA's on success and on failure"
