#!/bin/sh
# cmt tune on a GPU: the instant estimate and a short full search each write a profile that
# validates and that `cmt profile show` then applies from this user's profile directory.
# Exit 77 without a GPU.
set -u
cmt=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME="$tmp/xdg"
"$cmt" tune --search instant --largest 64M > "$tmp/out" 2> "$tmp/err"; rc=$?
cat "$tmp/out" "$tmp/err"
if grep -q -e "no CUDA driver" -e "no usable NVIDIA GPU" "$tmp/err"; then exit 77; fi
[ $rc -eq 0 ] || { echo "FAIL: cmt tune --search instant exited $rc"; exit 1; }
profile=$("$cmt" profile path 2>/dev/null)
[ -f "$profile" ] || { echo "FAIL: no profile at $profile"; exit 1; }
"$cmt" profile validate "$profile" > /dev/null || { echo "FAIL: the written profile is not valid"; exit 1; }
# Every knob the option table marks tuned is in the profile.
keys=$("$cmt" profile options | sed -nE 's/^CMT_[A-Z0-9_]+ \(([a-z0-9_]+)\)  \[[^]]*tuned\].*/\1/p')
[ -n "$keys" ] || { echo "FAIL: cmt profile options lists no tuned knob"; exit 1; }
for key in $keys; do
  grep -q "^$key = " "$profile" || { echo "FAIL: no $key in the profile"; cat "$profile"; exit 1; }
done
grep -q '^ *\[\[measured.copies\]\]' "$profile" || { echo "FAIL: no measured copies"; exit 1; }
"$cmt" profile show | grep -q "CMT_THREADS=.*(profile $profile)" ||
  { echo "FAIL: the profile is not applied"; "$cmt" profile show; exit 1; }
"$cmt" tune --search full --largest 16M -o "$tmp/full.toml" > "$tmp/out" 2>&1 ||
  { cat "$tmp/out"; echo "FAIL: cmt tune --search full"; exit 1; }
"$cmt" profile validate "$tmp/full.toml" > /dev/null || { echo "FAIL: full's profile is not valid"; exit 1; }
grep -q "^search = .full.$" "$tmp/full.toml" || { echo "FAIL: not a full search's profile"; exit 1; }
# The full search measures lanes with concurrent callers, bytes checked, and writes its pick.
grep -q "^lanes = [0-9]" "$tmp/full.toml" || { cat "$tmp/full.toml"; echo "FAIL: no lanes"; exit 1; }
grep -Eq "lanes: 8 callers .* 1 lanes [1-9][0-9.]*; 2 lanes [1-9][0-9.]*; 4 lanes [1-9]" "$tmp/out" ||
  { cat "$tmp/out"; echo "FAIL: the lanes were not measured"; exit 1; }
# gpu_cores: written always; where other GPUs share the tuned one's cores (the 2-GPU machine),
# measured with all of them copying at once.
grep -Eq "^gpu_cores = [\"'](all|split)[\"']" "$tmp/full.toml" || { cat "$tmp/full.toml"; echo "FAIL: no gpu_cores"; exit 1; }
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ]; then
  grep -Eq "gpu_cores: the [2-9][0-9]* GPUs on these cores at once.* all [1-9][0-9.]*; split [1-9]" "$tmp/out" ||
    { cat "$tmp/out"; echo "FAIL: gpu_cores was not measured with the GPUs together"; exit 1; }
fi
"$cmt" profile export > "$tmp/export.toml" 2>/dev/null && cmp -s "$tmp/export.toml" "$profile" ||
  { echo "FAIL: profile export"; exit 1; }
# Per GPU: the knobs go under [gpu."BUS"], and `cmt profile show` lists them for that GPU.
"$cmt" tune --search instant --largest 16M --per-gpu -o "$tmp/gpus.toml" > "$tmp/out" 2>&1 ||
  { cat "$tmp/out"; echo "FAIL: cmt tune --per-gpu"; exit 1; }
grep -q '^\[gpu\.' "$tmp/gpus.toml" || { cat "$tmp/gpus.toml"; echo "FAIL: no [gpu.BUS] table"; exit 1; }
"$cmt" profile show --profile "$tmp/gpus.toml" | grep -q "^GPU [0-9a-f]*:.*threads=" ||
  { echo "FAIL: show does not list the GPU's knobs"; exit 1; }
# Ctrl-C during a full search keeps the best so far: the profile is still written, marked.
"$cmt" tune --search full -o "$tmp/stopped.toml" > "$tmp/out" 2>&1 &
pid=$!
for i in $(seq 120); do  # until the search's progress line shows, then a moment into it
  grep -q '^\[[#.]*\] ' "$tmp/out" && break
  sleep 0.5
done
sleep 2
kill -INT $pid
wait $pid; rc=$?
[ $rc -eq 0 ] || { cat "$tmp/out"; echo "FAIL: an interrupted search exited $rc"; exit 1; }
grep -q "interrupted: keeping the best so far" "$tmp/out" || { echo "FAIL: no interruption notice"; exit 1; }
grep -q "^interrupted = true" "$tmp/stopped.toml" || { echo "FAIL: the profile is not marked"; exit 1; }
"$cmt" profile validate "$tmp/stopped.toml" > /dev/null || { echo "FAIL: not valid"; exit 1; }
echo "ok: instant, full, per-GPU and interrupted searches wrote valid profiles"
