#!/bin/bash
# cmt's fread against glibc's own, stream state by stream state (fread_states_app.cpp): the
# program passes without cmt, under cmt with host_reads = all (its large freads into ordinary
# memory taken: the statistics must count at least 30 of them, so that the test cannot pass by
# cmt declining them), and with host reads off.
# usage: fread_states.sh LIBCMT LIBCMT_HOST APP (against the fake driver, or the real one: exit 77
# where it finds no GPU)
set -u
lib=$1
hostlib=$2
app=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

timeout 120 "$app" > "$tmp/plain.out" 2>&1; rc=$?
[ $rc -eq 77 ] || [ $rc -eq 127 ] && { echo "no GPU or no CUDA driver: skipped"; exit 77; }
if [ $rc -ne 0 ]; then
  echo "FAIL: the program fails without cmt (exit $rc)"; cat "$tmp/plain.out"; exit 1
fi
echo "ok   without cmt: $(cat "$tmp/plain.out")"

# run NAME HOST_READS LEAST: under cmt, every step as glibc's, and at least LEAST reads taken
run() {
  local name=$1 reads=$2 least=$3
  CMT_HOST_READS=$reads CMT_STATS=$tmp/$name.json CMT_LOG=error LD_PRELOAD=$lib:$hostlib \
    timeout 120 "$app" > "$tmp/$name.out" 2> "$tmp/$name.err"
  local rc=$?
  local taken
  taken=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["host_copies"]["reads"]["calls"])' \
    "$tmp/$name.json" 2>/dev/null || echo none)
  if [ $rc -ne 0 ] || [ "$taken" = none ] || [ "$taken" -lt "$least" ]; then
    echo "FAIL $name: exit $rc, reads taken by cmt: $taken (want $least or more)"
    cat "$tmp/$name.out"; head -40 "$tmp/$name.err"
    fails=$((fails + 1)); return
  fi
  echo "ok   $name: $(cat "$tmp/$name.out"), reads taken by cmt: $taken"
}

run reads_all all 30
run reads_off off 0
[ "$fails" -eq 0 ] || { echo "FAIL: $fails run(s)"; exit 1; }
echo "ok: fread under cmt leaves every stream as glibc's fread does"
