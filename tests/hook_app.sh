#!/bin/sh
# The hooks on a machine without a GPU (CI) or with one: every call reaches CUDA untouched, cmt
# counts why, its statistics file and its at-exit summary say so, and the program's own output and
# return values are those it has without cmt.
set -u
lib=$1
app=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$app" > "$tmp/plain.txt" 2>&1
LD_PRELOAD=$lib CMT_STATS=$tmp/stats.json CMT_LOG=info "$app" > "$tmp/cmt.txt" 2> "$tmp/err.txt"
cmp -s "$tmp/plain.txt" "$tmp/cmt.txt" || { echo "FAIL: output differs under cmt"; cat "$tmp/plain.txt" "$tmp/cmt.txt"; exit 1; }
python3 - "$tmp/stats.json" <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))
f = s["forwarded"]
assert s["taken"]["h2d"]["calls"] == 0 and s["taken"]["d2h"]["calls"] == 0, s
assert f["below_threshold"] == 1, f
assert sum(f.values()) == 2, f   # the large one: no driver (engine_unavailable) or host<->host
print("forwarded:", {k: v for k, v in f.items() if v})
PY
grep -q "\[cmt\] \[info\] at exit: copies taken: H2D 0" "$tmp/err.txt" || { echo "FAIL: no summary"; cat "$tmp/err.txt"; exit 1; }
# A thread that opted out (cmt_forward_this_thread): every call forwarded, counted as disabled.
LD_PRELOAD=$lib CMT_STATS=$tmp/optout.json "$app" optout > "$tmp/optout.txt" 2>&1
cmp -s "$tmp/plain.txt" "$tmp/optout.txt" || { echo "FAIL: output differs when opted out"; exit 1; }
python3 -c "
import json; f = json.load(open('$tmp/optout.json'))['forwarded']
assert f['disabled'] == 2 and sum(f.values()) == 2, f" || { echo "FAIL: opt-out not honoured"; exit 1; }
# A bad profile or variable inside the program: one warning each, naming the file and line or the
# variable, then defaults; the program's output is unchanged.
printf 'schema = 1\n[cmt]\nslots = "many"\n' > "$tmp/bad.toml"
LD_PRELOAD=$lib CMT_PROFILE=$tmp/bad.toml CMT_THREADS=lots "$app" > "$tmp/cmt2.txt" 2> "$tmp/err2.txt"
cmp -s "$tmp/plain.txt" "$tmp/cmt2.txt" || { echo "FAIL: output differs with bad settings"; exit 1; }
grep -q "bad.toml:3:9: key 'cmt.slots' = 'many' is not valid: expected an integer from 2 to 1024 (profile ignored)" "$tmp/err2.txt" \
  || { echo "FAIL: no profile warning"; cat "$tmp/err2.txt"; exit 1; }
grep -q "CMT_THREADS='lots' is not valid" "$tmp/err2.txt" || { echo "FAIL: no variable warning"; exit 1; }
[ "$(grep -c "not valid" "$tmp/err2.txt")" -eq 2 ] || { echo "FAIL: expected each warning once"; cat "$tmp/err2.txt"; exit 1; }
# Copy threads past this process's cores are capped, and said once (issue 31, finding 6).
LD_PRELOAD=$lib CMT_THREADS=256 "$app" > "$tmp/cmt3.txt" 2> "$tmp/err3.txt"
cmp -s "$tmp/plain.txt" "$tmp/cmt3.txt" || { echo "FAIL: output differs with CMT_THREADS=256"; exit 1; }
grep -q "threads (env CMT_THREADS) = 256 is more than the [0-9]* cores this process may run on; using" "$tmp/err3.txt" ||
  { echo "FAIL: threads not capped with a warning"; cat "$tmp/err3.txt"; exit 1; }
# CMT_STATS replaces what is at its path, never following or opening it: a symlink's target is
# untouched, a FIFO does not hang the exit, and the file is the user's alone.
echo "precious" > "$tmp/target"
ln -s "$tmp/target" "$tmp/link.json"
LD_PRELOAD=$lib CMT_STATS=$tmp/link.json "$app" > /dev/null 2>&1
[ "$(cat "$tmp/target")" = precious ] || { echo "FAIL: CMT_STATS wrote through a symlink"; exit 1; }
[ -f "$tmp/link.json" ] && [ ! -L "$tmp/link.json" ] || { echo "FAIL: CMT_STATS left the symlink"; exit 1; }
[ "$(stat -c %a "$tmp/link.json")" = 600 ] || { echo "FAIL: stats mode $(stat -c %a "$tmp/link.json")"; exit 1; }
mkfifo "$tmp/fifo.json"
LD_PRELOAD=$lib CMT_STATS=$tmp/fifo.json timeout 20 "$app" > /dev/null 2>&1
[ $? -ne 124 ] || { echo "FAIL: a FIFO as CMT_STATS hung the exit"; exit 1; }
python3 -c "import json; json.load(open('$tmp/fifo.json'))" || { echo "FAIL: no stats in place of the FIFO"; exit 1; }
[ -z "$(ls "$tmp" | grep 'json\.')" ] || { echo "FAIL: temporary files left: $(ls "$tmp")"; exit 1; }
# The reliability issue's reproduction: a profile that is /dev/zero under a 1.1 GB address-space
# limit once grew the host until std::bad_alloc escaped a hook and terminated it. Nothing may leave
# a hook by exception, and the profile is refused at once.
(ulimit -v 1100000; LD_PRELOAD=$lib CMT_PROFILE=/dev/zero timeout 60 "$app" > "$tmp/zero.txt" 2> "$tmp/zero.err")
rc=$?
# The program's own output under the same limit, without cmt: where there is a GPU, CUDA itself
# cannot start in 1.1 GB of address space, with cmt or without.
(ulimit -v 1100000; "$app" > "$tmp/plain-limited.txt" 2>&1)
[ $rc -eq 0 ] || { echo "FAIL: CMT_PROFILE=/dev/zero under ulimit -v: exit $rc"; cat "$tmp/zero.err"; exit 1; }
grep -q "terminate called" "$tmp/zero.err" && { echo "FAIL: an exception escaped"; exit 1; }
grep -q "/dev/zero: cannot read the profile: is a device" "$tmp/zero.err" ||
  { echo "FAIL: /dev/zero not refused"; cat "$tmp/zero.err"; exit 1; }
cmp -s "$tmp/plain-limited.txt" "$tmp/zero.txt" ||
  { echo "FAIL: output differs with CMT_PROFILE=/dev/zero"; cat "$tmp/plain-limited.txt" "$tmp/zero.txt"; exit 1; }
echo "ok: hooks forward and count; summary: $(grep 'at exit' "$tmp/err.txt")"
