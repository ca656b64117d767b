#!/bin/bash
# The host leg on a CPU machine: host_copy_app's random memcpy/memmove/memset calls (odd sizes and
# alignments, overlapping memmoves, fortified forms, a signal handler's copies, a forked child's,
# fills of new memory)
# under libcmt.so and libcmt-host.so, checked byte for byte against libc; with host_copy = pinned
# (only copies that touch CUDA host memory are taken, and all of those are), all (every large one,
# from several threads at once) and off (none); file reads with host_reads = all and off beside
# host_copy = pinned; and with libcmt.so alone (none).
set -u
lib=$1
hostlib=$2
app=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
threshold=65536
fails=0
# Against the real driver (gpu_host_copy), skipped where there is no GPU.
timeout 120 "$app" 1 0 11 "$threshold" > /dev/null 2>&1; rc=$?
[ $rc -eq 77 ] || [ $rc -eq 127 ] && { echo "no GPU or no CUDA driver: skipped"; exit 77; }

# run NAME MODE FILL_MODE THREADS CALLS [PRELOAD]
run() {
  local name=$1 mode=$2 fill=$3 threads=$4 calls=$5 preload=${6:-$lib:$hostlib}
  CMT_HOST_COPY=$mode CMT_HOST_COPY_THRESHOLD=64K CMT_HOST_FILL=$fill CMT_HOST_FILL_THRESHOLD=1M \
    CMT_HOST_READS=${READS:-pinned} \
    LD_PRELOAD=$preload CMT_STATS=$tmp/$name.json \
    CMT_LOG=error timeout 300 "$app" "$threads" "$calls" 11 "$threshold" > "$tmp/$name.out" 2> "$tmp/$name.err"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL $name: exit $rc"; cat "$tmp/$name.out"; head -20 "$tmp/$name.err"
    fails=$((fails + 1)); return
  fi
  python3 - "$name" "$mode" "$fill" "$tmp/$name.out" "$tmp/$name.json" "${READS:-pinned}" <<'PY' || fails=$((fails + 1))
import json, sys
name, mode, fill, out, stats, reads = sys.argv[1:]
w = open(out).read().split()
r = {w[i]: int(w[i + 1]) for i in range(0, len(w) - 1, 2)}
h = json.load(open(stats))["host_copies"]
offered = h["calls"] + h["declined_busy"]
line = (f"{name}: {r['calls']} calls ({r['large']} large, {r['large_pinned']} touching pinned memory), "
        f"{r['signal_copies']} in a signal handler, 0 wrong; cmt took {h['calls']} "
        f"({h['bytes'] / 2**30:.2f} GiB, {h['gbps']} GB/s), {h['declined_busy']} left to libc while busy")
if name == "nohooks":
    ok = not h["armed"] and h["calls"] == 0  # without libcmt-host.so: no threads, no copies
elif mode == "pinned":
    # Every large call that touches pinned memory is offered; the handler's are too, unless the
    # signal arrived during one of cmt's copies on that thread (then libc makes it, uncounted).
    # declined_busy counts every call that found the threads held, the racing reads' too.
    ok = h["armed"] and h["calls"] > 0 and r["large_pinned"] <= offered <= (
        r["large_pinned"] + r["signal_copies"] + r["shared_reads"])
elif mode == "all":
    ok = h["armed"] and h["calls"] > 0 and offered >= r["large"]
else:
    ok = not h["armed"] and h["calls"] == 0
f = h["fills"]
line += (f"; {r['fills']} memsets ({r['large_fills']} large, {r['fresh_fills']} into new memory), "
         f"cmt took {f['calls']} ({f['bytes'] / 2**30:.2f} GiB, {f['gbps']} GB/s)")
if name == "nohooks" or fill == "off":
    ok = ok and f["calls"] == 0
elif fill == "fresh":
    # The new mappings' fills, and none of the others (their buffers are all written): unless
    # another job held the threads.
    ok = ok and 0 < f["calls"] <= r["fresh_fills"]
else:
    ok = ok and f["calls"] > 0
# File reads: every large one into pinned memory taken where host copies and reads are on (the
# threads idle by then), and with host_copy = all or host_reads = all every large one into other
# memory too; none where off; their bytes were checked by the program.
anywhere = mode == "all" or reads == "all"
rd = h["reads"]
line += (f"; {r['reads']} file reads ({r['large_reads']} large into pinned memory, "
         f"{r['large_plain_reads']} into other memory), cmt read {rd['calls']}")
# freads: those that are large may find enough bytes in the stream's buffer, or be past the end of
# the file, and then need no read; every other one is taken (with all, the mirror stream's too),
# and one that stops short reads again, as glibc's does (finding the end of the file: two reads).
on = mode != "off" and reads != "off" and name != "nohooks"
line += f", {r['large_freads']} large freads"
least = r["large_reads"] + (r["large_plain_reads"] if anywhere else 0)
# Reads racing on one descriptor from three threads: each may find the threads held by another.
most = least + r["large_freads"] * (2 if anywhere else 1) * 2 + r["shared_reads"]
ok = ok and (least <= rd["calls"] <= most if on else rd["calls"] == 0)
print(("ok   " if ok else "FAIL ") + line)
sys.exit(0 if ok else 1)
PY
}

run pinned pinned fresh 1 3000
run all_threads all all 4 1500
run off off off 1 500
# File reads into any memory with memcpy still pinned-only, and no file reads at all.
# With a read and an fread of 2 GiB and more (past what one read() moves) into ordinary memory.
HOST_COPY_PAST_READ_LIMIT=1 READS=all run reads_all pinned fresh 1 1500
READS=off run reads_off pinned fresh 1 500
# libcmt.so alone (as a plain LD_PRELOAD of it, or `cmt run` with host copies off): libc copies.
run nohooks pinned fresh 1 500 "$lib"
# And without cmt, the program itself passes.
"$app" 1 200 11 "$threshold" > /dev/null || { echo "FAIL: the program fails without cmt"; fails=$((fails + 1)); }
[ "$fails" -eq 0 ] || { echo "FAIL: $fails run(s)"; exit 1; }
echo "ok: memcpy and memmove under cmt are byte-exact, and taken where they should be"
