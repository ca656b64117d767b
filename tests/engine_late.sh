#!/bin/sh
# libcmt.so loads the rest of cmt (libcmt-engine.so) only on the first call of a CUDA entry point
# it hooks (hooks/engine_link.h): a process that never makes one never maps the engine; one that
# does gets it (taken_once.sh checks what it then does). Without the engine beside libcmt.so, the
# program still runs as without cmt, its CUDA calls forwarded untouched, and is told so once.
set -u
lib=$1
host=$2
app=$3
fake_driver=$4
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LD_PRELOAD="$lib:$host" cat /proc/self/maps > "$tmp/maps" || fail "cat under the preload"
grep -q "/libcmt.so$" "$tmp/maps" || fail "libcmt.so is not mapped: $(cat "$tmp/maps")"
grep -q "libcmt-engine.so" "$tmp/maps" && fail "a process that never called CUDA mapped the engine"

export CMT_FAKE_LIBCUDA=$fake_driver
export LD_LIBRARY_PATH="$(dirname "$fake_driver")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cp "$lib" "$tmp/libcmt.so"
LD_PRELOAD="$tmp/libcmt.so" CMT_STATS="$tmp/stats.json" "$app" > "$tmp/out" 2> "$tmp/err" ||
  fail "without the engine the program fails: $(cat "$tmp/out" "$tmp/err")"
grep -q "the driver saw 1 call(s) of 8388608 bytes" "$tmp/out" || fail "the copy: $(cat "$tmp/out")"
n=$(grep -c "^cmt: cannot load $tmp/libcmt-engine.so" "$tmp/err")
[ "$n" -eq 1 ] || fail "told $n times, not once: $(cat "$tmp/err")"
[ -e "$tmp/stats.json" ] && fail "statistics written without an engine"
echo "ok: no engine mapped without a CUDA call; without an engine, forwarded and told once:"
cat "$tmp/err"
