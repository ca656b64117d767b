#!/bin/sh
# Runs a build of preload_app under LD_PRELOAD=libcmt.so and proves from cmt's statistics that
# its copies were taken, through the expected kind of hook (runtime: a dynamic cudart's
# cudaMemcpy*; driver: a static cudart reaching cuMemcpy* through dlsym/cuGetProcAddress) or the
# batch hook (cudaMemcpyBatchAsync's copies, either way); that
# each device-to-device call reached cmt exactly once, taken if between two GPUs, forwarded as
# same_gpu if within one; then with CMT_DISABLE=1, that none were taken. Exit 77 where there is
# no GPU.
set -u
lib=$1
app=$2
via=${3:-runtime}
stats=$(mktemp)
out=$(mktemp)
trap 'rm -f "$stats" "$out"' EXIT
LD_PRELOAD=$lib CMT_STATS=$stats "$app" > "$out"; rc=$?
cat "$out"
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: preload_app under cmt exited $rc"; exit 1; }
cat "$stats"
python3 - "$stats" "$via" "$out" <<'PY' || exit 1
import json, re, sys
s = json.load(open(sys.argv[1]))
via = sys.argv[2]
m = re.search(r"(\d+) within one GPU, (\d+) between two", open(sys.argv[3]).read())
assert m, "the program did not say how many device-to-device calls it made"
same, cross = int(m.group(1)), int(m.group(2))
t = s["taken"]
assert t["h2d"]["calls"] > 0 and t["d2h"]["calls"] > 0, "no copy was taken"
assert s["forwarded"]["below_threshold"] > 0, "small copies should be forwarded"
# Every device-to-device call reached cmt once: within a GPU forwarded, between two taken.
assert s["forwarded"]["same_gpu"] == same, "expected %d same_gpu forwards: %s" % (same, s)
assert t["gpu_to_gpu"]["calls"] == cross, "expected %d GPU-to-GPU copies taken: %s" % (cross, s)
calls = t["h2d"]["calls"] + t["d2h"]["calls"] + t["gpu_to_gpu"]["calls"]
batch = s["taken_via"]["batch"]
assert batch > 0, "no copy of a cudaMemcpyBatchAsync was taken: %s" % s
assert s["taken_via"][via] + batch == calls, "expected every copy taken through %s hooks or batches: %s" % (via, s)
print("taken through %s hooks: h2d %d calls, d2h %d calls, GPU to GPU %d, %d of them in batches; "
      "%d within one GPU forwarded" % (via, t["h2d"]["calls"], t["d2h"]["calls"],
                                        t["gpu_to_gpu"]["calls"], batch, same))
PY
LD_PRELOAD=$lib CMT_DISABLE=1 CMT_STATS=$stats "$app" > "$out" || { cat "$out"; echo "FAIL: with CMT_DISABLE=1"; exit 1; }
python3 -c "
import json,sys; s=json.load(open('$stats'))
assert s['taken']['h2d']['calls'] == 0 and s['taken']['d2h']['calls'] == 0, s
assert s['taken']['gpu_to_gpu']['calls'] == 0, s
assert s['forwarded']['disabled'] > 0
print('CMT_DISABLE=1: nothing taken')" || exit 1
