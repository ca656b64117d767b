#!/bin/sh
# Preloaded into processes that never use CUDA, libcmt.so (alone, and with libcmt-host.so, as
# `cmt run` preloads them) changes nothing and prints nothing: the loader included (an indirect
# function in libcmt-host.so made it print "Relink ..." in every bash, whose libtinfo binds at
# load time).
# usage: preload_silent.sh LIBCMT LIBCMT_HOST
set -u
fail=0
check() {
  lib=$1
  out=$(LD_PRELOAD=$lib /bin/true 2>&1); rc=$?
  [ $rc -eq 0 ] && [ -z "$out" ] || { echo "FAIL [$lib]: /bin/true: rc=$rc output=[$out]"; fail=1; }
  out=$(LD_PRELOAD=$lib /bin/false 2>&1); rc=$?
  [ $rc -eq 1 ] && [ -z "$out" ] || { echo "FAIL [$lib]: /bin/false: rc=$rc output=[$out]"; fail=1; }
  out=$(echo hello | LD_PRELOAD=$lib CMT_LOG=debug cat 2>&1); rc=$?
  [ $rc -eq 0 ] && [ "$out" = "hello" ] || { echo "FAIL [$lib]: cat: rc=$rc output=[$out]"; fail=1; }
  for shell in bash dash; do
    command -v $shell >/dev/null || continue
    out=$(LD_PRELOAD=$lib $shell -c 'echo $((6*7))' 2>&1); rc=$?
    [ $rc -eq 0 ] && [ "$out" = "42" ] || { echo "FAIL [$lib]: $shell: rc=$rc output=[$out]"; fail=1; }
  done
  if command -v python3 >/dev/null; then
    # ctypes and ssl look symbols up with dlsym, which libcmt.so hooks.
    code='import ctypes, ctypes.util, json, sqlite3, hashlib, ssl; libc = ctypes.CDLL(ctypes.util.find_library("c")); print(json.dumps([libc.abs(-3), hashlib.sha256(b"x").hexdigest()[:8], ssl.OPENSSL_VERSION[:7], sqlite3.connect(":memory:").execute("select 2*21").fetchone()[0]]))'
    want=$(python3 -c "$code" 2>&1)
    got=$(LD_PRELOAD=$lib python3 -c "$code" 2>&1); rc=$?
    [ $rc -eq 0 ] && [ "$got" = "$want" ] || { echo "FAIL [$lib]: python3: rc=$rc [$got] != [$want]"; fail=1; }
  fi
  # A bad environment value warns once and the program still runs normally.
  out=$(LD_PRELOAD=$lib CMT_THREADS=lots /bin/true 2>&1); rc=$?
  [ $rc -eq 0 ] && [ -z "$out" ] || { echo "FAIL [$lib]: bad value before any copy: rc=$rc output=[$out]"; fail=1; }
}
check "$1"
check "$1:$2"
[ $fail -eq 0 ] && echo "ok: preloaded into /bin/true, /bin/false, cat, the shells and python3 without a trace"
exit $fail
