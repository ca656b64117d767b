#!/bin/sh
# Preloaded into processes that never use CUDA, libcmt.so changes nothing and prints nothing.
set -u
lib=$1
fail=0
out=$(LD_PRELOAD=$lib /bin/true 2>&1); rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] || { echo "FAIL: /bin/true: rc=$rc output=[$out]"; fail=1; }
out=$(LD_PRELOAD=$lib /bin/false 2>&1); rc=$?
[ $rc -eq 1 ] && [ -z "$out" ] || { echo "FAIL: /bin/false: rc=$rc output=[$out]"; fail=1; }
out=$(echo hello | LD_PRELOAD=$lib CMT_LOG=debug cat 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$out" = "hello" ] || { echo "FAIL: cat: rc=$rc output=[$out]"; fail=1; }
if command -v python3 >/dev/null; then
  # ctypes and ssl look symbols up with dlsym, which libcmt.so hooks.
  code='import ctypes, ctypes.util, json, sqlite3, hashlib, ssl; libc = ctypes.CDLL(ctypes.util.find_library("c")); print(json.dumps([libc.abs(-3), hashlib.sha256(b"x").hexdigest()[:8], ssl.OPENSSL_VERSION[:7], sqlite3.connect(":memory:").execute("select 2*21").fetchone()[0]]))'
  want=$(python3 -c "$code" 2>&1)
  got=$(LD_PRELOAD=$lib python3 -c "$code" 2>&1); rc=$?
  [ $rc -eq 0 ] && [ "$got" = "$want" ] || { echo "FAIL: python3: rc=$rc [$got] != [$want]"; fail=1; }
fi
# A bad environment value warns once and the program still runs normally.
out=$(LD_PRELOAD=$lib CMT_THREADS=lots /bin/true 2>&1); rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] || { echo "FAIL: bad value before any copy: rc=$rc output=[$out]"; fail=1; }
[ $fail -eq 0 ] && echo "ok: preloaded into /bin/true, /bin/false, cat and python3 without a trace"
exit $fail
