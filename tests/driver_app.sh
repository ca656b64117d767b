#!/bin/sh
# Runs driver_app (driver API only) under LD_PRELOAD=libcmt.so and proves from cmt's statistics
# that every large copy, through each way of reaching the driver, was taken by a driver hook.
# Exit 77 where there is no GPU or no CUDA driver.
set -u
lib=$1
app=$2
out=$(mktemp)
stats=$(mktemp)
trap 'rm -f "$out" "$stats"' EXIT
LD_PRELOAD=$lib CMT_STATS=$stats "$app" > "$out"; rc=$?
cat "$out"
[ $rc -eq 77 ] && exit 77
[ $rc -eq 127 ] && { echo "no CUDA driver (libcuda.so.1): skipped"; exit 77; }
[ $rc -eq 0 ] || { echo "FAIL: driver_app under cmt exited $rc"; exit 1; }
cat "$stats"
large=$(sed -n 's/^large copies: //p' "$out")
python3 - "$stats" "$large" <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))
large = int(sys.argv[2])
taken = s["taken"]["h2d"]["calls"] + s["taken"]["d2h"]["calls"]
assert taken == large, "%d of %d large copies taken" % (taken, large)
assert s["taken_via"]["driver"] == large, s
assert s["partial"] == 0, s
print("all %d large copies taken through the driver hooks" % large)
PY
