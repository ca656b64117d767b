#!/bin/sh
# Runs preload_app under LD_PRELOAD=libcmt.so and proves from cmt's statistics that its copies
# were taken; then with CMT_DISABLE=1, that none were. Exit 77 where there is no GPU.
set -u
lib=$1
app=$2
stats=$(mktemp)
trap 'rm -f "$stats"' EXIT
LD_PRELOAD=$lib CMT_STATS=$stats "$app"; rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: preload_app under cmt exited $rc"; exit 1; }
cat "$stats"
python3 - "$stats" <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))
t = s["taken"]
assert t["h2d"]["calls"] > 0 and t["d2h"]["calls"] > 0, "no copy was taken"
assert s["forwarded"]["below_threshold"] > 0, "small copies should be forwarded"
print("taken: h2d %d calls, d2h %d calls" % (t["h2d"]["calls"], t["d2h"]["calls"]))
PY
LD_PRELOAD=$lib CMT_DISABLE=1 CMT_STATS=$stats "$app" || { echo "FAIL: with CMT_DISABLE=1"; exit 1; }
python3 -c "
import json,sys; s=json.load(open('$stats'))
assert s['taken']['h2d']['calls'] == 0 and s['taken']['d2h']['calls'] == 0, s
assert s['forwarded']['disabled'] > 0
print('CMT_DISABLE=1: nothing taken')" || exit 1
