#!/bin/sh
# A copy seen by both a runtime hook and the driver hook that the runtime calls underneath is
# offered to cmt once: with a fake runtime and a fake driver (no GPU), one cudaMemcpy under
# libcmt.so reaches the driver once and appears once in cmt's statistics; a zero-byte one is
# forwarded to the runtime. A cudaStreamSynchronize, which the runtime passes to the driver's
# cuStreamSynchronize, is kept once in a recorded trace (trace version 6), by the runtime's name.
set -u
lib=$1
app=$2
fake_driver=$3
stats=$(mktemp)
trace=$(mktemp)
trap 'rm -f "$stats" "$trace"' EXIT
export CMT_FAKE_LIBCUDA=$fake_driver
# The fake is the only libcuda.so.1 this program may see: on a machine with a real driver, cmt's
# own dlopen("libcuda.so.1") would load the real one first, and the fake runtime's dlopen of the
# fake by path would then return it (same soname).
export LD_LIBRARY_PATH="$(dirname "$fake_driver")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$app" || { echo "FAIL: the program fails without cmt"; exit 1; }
LD_PRELOAD=$lib CMT_STATS=$stats CMT_RECORD=$trace "$app" || { echo "FAIL: under cmt"; exit 1; }
python3 -c "
import json; s = json.load(open('$stats'))
fwd = s['forwarded']
offered = s['taken']['h2d']['calls'] + s['taken']['d2h']['calls'] + sum(fwd.values()) - fwd['below_threshold']
assert offered == 1, 'the 8 MiB copy was offered %d times: %s' % (offered, s)
assert fwd['below_threshold'] == 1, 'the zero-byte copy: %s' % s
print('ok: offered to cmt once (forwarded: %s)' % {k: v for k, v in s['forwarded'].items() if v})" || exit 1
python3 - "$trace" <<'PY' || { cat "$trace"; exit 1; }
import sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0].startswith("# cmt trace 6 "), lines[0]
rows = [l.split("\t") for l in lines[2:]]
waits = [r for r in rows if r[4] == "wait"]
assert [r[3] for r in waits] == ["cudaStreamSynchronize"], "the waits kept: %s" % waits
w = waits[0]
assert int(w[1]) >= int(w[0]) and w[5] == "0" and w[7] == "wait" and w[10] == "0", w
assert w[9] == "0x1", "a NULL stream is the legacy one: %s" % w[9]
print("ok: the wait kept once, as cudaStreamSynchronize")
PY
