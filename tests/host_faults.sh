#!/bin/bash
# Faults, signals and cancellation inside the host leg's copies (issue 31, findings 1 and 2): every
# scenario of host_faults_app behaves as it does with libc alone, and under cmt the calls were
# taken by the copy threads (the statistics count the taken calls and the faults they met), so
# the test cannot pass by cmt declining them.
# usage: host_faults.sh LIBCMT LIBCMT_HOST APP (against the fake driver, or the real one: exit 77
# where it finds no GPU)
set -u
lib=$1
hostlib=$2
app=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect NAME RC OUTPUT (label: with or without cmt): the scenario's exit status, and its "ok" line unless it is to die
expect() {
  local name=$1 want=$2 rc=$3 out=$4
  if [ "$rc" -ne "$want" ] || { [ "$want" -eq 0 ] && ! grep -q "^ok $name" <<<"$out"; }; then
    echo "FAIL $name $label: exit $rc (want $want)"; echo "$out"
    fails=$((fails + 1)); return 1
  fi
}

# taken NAME FIELD LEAST: under cmt, the statistics' host_copies FIELD (fill_F: fills' F, read_F:
# reads' F; engine_h2d, engine_d2h: copies to and from the GPU the engine took) is >= LEAST
taken() {
  python3 - "$tmp/$1.json" "$2" "$3" <<'PY'
import json, sys
path, field, least = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = json.load(open(path))
h = s["host_copies"]
got = (h["fills"][field[5:]] if field.startswith("fill_")
       else h["reads"][field[5:]] if field.startswith("read_")
       else s["taken"][field[7:]]["calls"] if field.startswith("engine_") else h[field])
print(f"  {field} {got}")
sys.exit(0 if got >= least else 1)
PY
}

# scenario NAME RC [FIELD LEAST]
scenario() {
  local name=$1 want=$2 field=${3:-} least=${4:-0}
  label="without cmt"
  out=$(timeout 300 "$app" "$name" 2>&1); rc=$?
  expect "$name" "$want" "$rc" "$out" || return
  label="with cmt"
  out=$(CMT_HOST_COPY=all CMT_HOST_COPY_THRESHOLD=64K CMT_HOST_FILL=all CMT_HOST_FILL_THRESHOLD=1M \
        CMT_THREADS=4 CMT_LOG=error CMT_STATS=$tmp/$name.json LD_PRELOAD=$lib:$hostlib \
        timeout 300 "$app" "$name" 2>&1); rc=$?
  expect "$name" "$want" "$rc" "$out" || return
  if [ -n "$field" ] && ! taken "$name" "$field" "$least"; then
    echo "FAIL $name: cmt's copy threads did not take the calls"; fails=$((fails + 1)); return
  fi
  echo "ok   $name: as without cmt (exit $rc)"
}

timeout 60 "$app" probe > /dev/null 2>&1; rc=$?
[ $rc -eq 77 ] || [ $rc -eq 127 ] && { echo "no GPU or no CUDA driver: skipped"; exit 77; }
[ $rc -eq 0 ] || { echo "FAIL: $app cannot start CUDA (exit $rc)"; exit 1; }
scenario guard-src 0 faults 10
scenario guard-dst 0 faults 10
scenario truncated-src 0 faults 10
scenario fill-readonly 0 fill_faults 10
scenario fill-truncated 0 fill_faults 10
scenario mend 0 faults 1
scenario signal-api 0 faults 5
scenario no-handler 139
scenario alarm-longjmp 0 calls 100
scenario sigqueue 0 calls 20
scenario cancel 0 calls 20
scenario query 0 calls 1
# The "rc" stream's fread is taken (no cancellation point); the cancelled calls are not.
scenario cancel-read 0 read_calls 1
# Threads cancelled while (or just before) they copy to the GPU and back through cmt's engine.
scenario cancel-copy 0 engine_h2d 20
[ "$fails" -eq 0 ] || { echo "FAIL: $fails scenario(s)"; exit 1; }
echo "ok: faults, signals and cancellation inside host copies behave as with libc"
