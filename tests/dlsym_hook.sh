#!/bin/bash
# dlsym under libcmt.so answers exactly as without it, RTLD_NEXT from a library included, and
# answers libcuda's 64-bit copy entry points, cuGetProcAddress and nothing else with cmt's hooks.
set -u
lib=$1
app=$2
stub=${3:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$app" "$stub" > "$dir/without" || { echo "FAIL: the probe failed without cmt"; exit 1; }
LD_PRELOAD=$lib CMT_STATS=$dir/stats "$app" "$stub" > "$dir/with" 2> "$dir/stderr" ||
  { echo "FAIL: the probe failed under cmt"; cat "$dir/stderr"; exit 1; }
cat "$dir/with"
grep -q '^RTLD_NEXT from libcmt_probe_a: b$' "$dir/without" ||
  { echo "FAIL: the probe itself is wrong"; cat "$dir/without"; exit 1; }
if ! diff <(grep -v '^hooked:' "$dir/without") <(grep -v '^hooked:' "$dir/with"); then
  echo "FAIL: dlsym answers differently under cmt"; exit 1
fi
if grep -q '^hooked:' "$dir/without"; then
  grep '^hooked:' "$dir/without" | grep -qv 'libcuda' && { echo "FAIL: stub lookups"; exit 1; }
  n=$(grep -c '^hooked:' "$dir/without")
  m=$(grep '^hooked:' "$dir/with" | grep -c ': libcmt\(-engine\)\?.so$')
  [ "$n" -eq "$m" ] || { echo "FAIL: $m of $n hooked entry points answered by cmt"; exit 1; }
  python3 -c "
import json; s = json.load(open('$dir/stats'))
assert s['taken']['h2d']['calls'] == 0, s
assert s['forwarded']['engine_unavailable'] == 1, s
print('the copy through the stub was offered to cmt and forwarded: ok')" || exit 1
fi
echo "ok: dlsym unchanged; $(grep -c '^hooked:' "$dir/with") hooked entry points answered by cmt"
