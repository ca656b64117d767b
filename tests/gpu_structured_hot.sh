#!/bin/sh
# Copies cmt leaves to CUDA (2D, 3D, arrays) through the CUDA runtime, on buffers cmt registered
# as hot (structured_app.cpp), under `cmt run` with register = hot: no wrong byte, and cmt's
# statistics must show registrations handed back to CUDA (cudart's calls reached cmt's hooks).
# The same program registering its buffers itself, with no cmt, must see wrong bytes (the check
# can fail). usage: gpu_structured_hot.sh CMT APP [ROUNDS]; exit 77 without a GPU.
set -u
cmt=$1 app=$2 rounds=${3:-50}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CMT_REGISTER=hot CMT_STATS=$tmp/stats.json "$cmt" run -- "$app" "$rounds" > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 77 ] && { echo "no GPU: skipped"; exit 77; }
cat "$tmp/out"; grep -v "^\[cmt\]" "$tmp/err" | tail -5
[ $rc -eq 0 ] || { echo "FAIL: exit $rc under cmt"; exit 1; }
python3 - "$tmp/stats.json" <<'PY' || exit 1
import json, sys
h = json.load(open(sys.argv[1]))["hot_buffers"]
print(f"registrations {h['registrations']} handed_back_to_cuda {h['handed_back']} "
      f"copies_from_them {h['copies']}")
assert h["registrations"] > 0, "cmt registered nothing"
assert h["handed_back"] > 0, "no registration was handed back: cudart's copies missed cmt's hooks"
PY
"$app" "$rounds" --self-register > "$tmp/self" 2>&1; rc=$?
echo "without cmt, the program's own registrations: $(cat "$tmp/self") (exit $rc)"
[ $rc -eq 1 ] || { echo "FAIL: the check saw no early return from registered memory"; exit 1; }
echo "gpu_structured_hot: passed"
