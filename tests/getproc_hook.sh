#!/bin/bash
# cuGetProcAddress under libcmt.so, without a GPU (a fake libcuda): the exact 64-bit copy
# variants, cuGetProcAddress itself, the primary context's reset (how a static cudart's
# cudaDeviceReset reaches the driver) and a green context's destroy come back as cmt's hooks; the
# legacy 32-bit variant, other functions and misses come back as the library gave them; and each
# call through a swapped pointer reaches the library exactly once, with the whole copy (cmt cannot
# start its engine on the fake, so it forwards).
set -u
lib=$1
app=$2
fake=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$app" "$fake" > "$dir/without" || { echo "FAIL: the probe failed without cmt"; cat "$dir/without"; exit 1; }
LD_PRELOAD=$lib CMT_STATS=$dir/stats "$app" "$fake" > "$dir/with" 2> "$dir/stderr" ||
  { echo "FAIL: the probe failed under cmt"; cat "$dir/with" "$dir/stderr"; exit 1; }
cat "$dir/with"
diff <(grep -v '^hooked:' "$dir/without") <(grep -v '^hooked:' "$dir/with") ||
  { echo "FAIL: answers or calls differ under cmt"; exit 1; }
grep -q "the library saw: v2 1, v2_ptds 1, legacy 1, last 1000 bytes" "$dir/with" ||
  { echo "FAIL: each call must reach the library once"; exit 1; }
grep -q "the library saw: resets 1" "$dir/with" ||
  { echo "FAIL: the primary context's reset must reach the library once"; exit 1; }
grep -q "the library saw: first resets 1" "$dir/with" ||
  { echo "FAIL: the reset's first variant must reach the library once"; exit 1; }
grep -q "the library saw: green destroys 1" "$dir/with" ||
  { echo "FAIL: a green context's destroy must reach the library once"; exit 1; }
if grep '^hooked:' "$dir/without" | grep -qv 'libcuda.so.1$'; then echo "FAIL: the probe"; exit 1; fi
n=$(grep -c '^hooked:' "$dir/with")
m=$(grep '^hooked:' "$dir/with" | grep -c ': libcmt\(-engine\)\?.so$\|from libcmt\(-engine\)\?.so$')
[ "$n" -eq "$m" ] || { echo "FAIL: $m of $n exact variants answered by cmt"; exit 1; }
python3 -c "
import json; s = json.load(open('$dir/stats'))
f = s['forwarded']
assert s['taken']['h2d']['calls'] == 0, s
assert f['engine_unavailable'] == 2 and f['below_threshold'] == 0, f
print('the two 8 MiB copies were offered to cmt once each and forwarded')" || exit 1
echo "ok: cuGetProcAddress swaps exactly the variants cmt hooks"
