#!/bin/sh
# cmt under load on a GPU (gpu_stress.cpp), under `cmt run` with statistics: a short stress of 16
# threads, a randomized differential test against CUDA's own path, copies on capturing streams
# in each mode, and a pageable copy in a forked child. cmt must have taken copies, and no byte or
# return code may differ.
# usage: gpu_stress.sh CMT APP [STRESS_SECONDS] [DIFFERENTIAL_COPIES]; exit 77 without a GPU.
set -u
cmt=$1
app=$2
seconds=${3:-20}
cases=${4:-500}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for run in "stress $seconds 16" "differential $cases" "capture" "fork"; do
  name=${run%% *}
  # shellcheck disable=SC2086 # $run is several arguments
  CMT_STATS=$tmp/$name.json "$cmt" run -- "$app" $run > "$tmp/$name.out" 2> "$tmp/$name.err"; rc=$?
  [ $rc -eq 77 ] && { echo "no GPU: skipped"; exit 77; }
  cat "$tmp/$name.out"; grep -v "^\[cmt\]" "$tmp/$name.err" | tail -8
  [ $rc -eq 0 ] || { echo "FAIL: $name exited $rc"; exit 1; }
  python3 - "$tmp/$name.json" "$name" <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))
taken = s["taken"]["h2d"]["calls"] + s["taken"]["d2h"]["calls"]
print(f"{sys.argv[2]}: cmt took {taken} copies; forwarded {dict((k, v) for k, v in s['forwarded'].items() if v)}")
h = s["host_copies"]
if h["armed"]:  # CMT_HOST_COPY / CMT_HOST_FILL on: the host leg's share
    print(f"{sys.argv[2]}: host leg took {h['calls']} memcpy ({h['bytes'] / 2**30:.2f} GiB) and "
          f"{h['fills']['calls']} memset ({h['fills']['bytes'] / 2**30:.2f} GiB); faults {h['faults']}")
assert taken > 0, "cmt took no copy"
PY
done
echo "ok: stress, differential, capture and fork"
