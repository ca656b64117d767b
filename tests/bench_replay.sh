#!/bin/sh
# `cmt bench replay`: a trace that is not one, or that holds no host <-> device copy, is refused
# with exit 2 and its reason; then, on a GPU, a small trace written here (two threads, resident,
# fresh, file_cached and pinned sources, copies each way, synchronous and not, gaps) replayed in
# every mode with every byte checked (exit 0), its JSON consistent, and a window of it; a
# version-4 trace whose buffer copied three times is replayed from a buffer of its own, and
# registered under hot buffers; and a version-5 trace whose streams ran 30 ms of other work before
# each copy is replayed with the GPU busy that long (a round takes 30 ms a copy more than with
# --gpu-work off). Windows that are not one or hold no copy, a --gpu-work that is neither on nor
# off and a --gap-work that is neither work nor time are refused. Exit 77 without a GPU.
set -u
cmt=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head='start_ns	end_ns	tid	api	direction	bytes	taken_bytes	outcome	host	stream	result'
printf 'nothing here\n' > "$tmp/bad.tsv"
"$cmt" bench replay "$tmp/bad.tsv" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "bad.tsv:1: expected '# cmt trace 6" "$tmp/err" ||
  { echo "FAIL: a non-trace (rc $rc): $(cat "$tmp/err")"; exit 1; }
printf '# cmt trace 1 pid=1 exe=x\n%s\n1000\t2000\t1\tmemcpy\th2h\t8388608\t8388608\ttaken\t-\t0x0\t0\n' \
  "$head" > "$tmp/host.tsv"
"$cmt" bench replay "$tmp/host.tsv" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "holds no host <-> device copy to replay" "$tmp/err" ||
  { echo "FAIL: a trace without CUDA copies (rc $rc): $(cat "$tmp/err")"; exit 1; }
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\ttaken\t%s\t0x0\t0\n' "$@"; }
{
  echo '# cmt trace 1 pid=7 exe=/bin/loader calls=8 dropped=0'
  echo "$head"
  row 1000000 2000000 7 cudaMemcpyAsync h2d 5000001 5000001 resident
  row 1500000 2500000 8 cudaMemcpyAsync h2d 7340033 7340033 file_cached
  row 3000000 4000000 7 cudaMemcpy h2d 4194304 4194304 fresh
  row 3100000 3900000 8 cuMemcpyHtoDAsync_v2 h2d 3000000 3000000 pinned
  row 5000000 6000000 7 cudaMemcpyAsync d2h 6291459 6291459 resident
  row 5000000 6000000 8 cuMemcpyDtoH_v2 d2h 2097152 2097152 fresh
  row 7000000 8000000 7 cudaMemcpyAsync d2h 1048577 1048577 mixed
  row 7000000 7500000 8 cudaMemcpyBatchAsync '?' 9000000 0 below_threshold
} > "$tmp/small.tsv"
# A window: not START:END, or one that holds no copy, is refused with its reason.
"$cmt" bench replay "$tmp/small.tsv" --window 5:1 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "'5:1': expected START:END" "$tmp/err" ||
  { echo "FAIL: a window that ends before it starts (rc $rc): $(cat "$tmp/err")"; exit 1; }
"$cmt" bench replay "$tmp/small.tsv" --window 0.5:1 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "no host <-> device copy to replay in the window given" "$tmp/err" ||
  { echo "FAIL: an empty window (rc $rc): $(cat "$tmp/err")"; exit 1; }
"$cmt" bench replay "$tmp/small.tsv" --gap-work sometimes 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--gap-work" "$tmp/err" && grep -q "sometimes" "$tmp/err" ||
  { echo "FAIL: --gap-work sometimes (rc $rc): $(cat "$tmp/err")"; exit 1; }
"$cmt" bench replay "$tmp/small.tsv" --gpu-work maybe 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--gpu-work" "$tmp/err" && grep -q "maybe" "$tmp/err" ||
  { echo "FAIL: --gpu-work maybe (rc $rc): $(cat "$tmp/err")"; exit 1; }
"$cmt" bench replay "$tmp/small.tsv" --rounds 2 --json "$tmp/r.json" > "$tmp/out" 2>&1; rc=$?
cat "$tmp/out"
grep -q "no CUDA GPU found" "$tmp/out" && exit 77
[ $rc -eq 0 ] || { echo "FAIL: cmt bench replay exited $rc"; exit 1; }
grep -q "2 thread(s), 7 copies" "$tmp/out" && grep -q "as busy loops of that length" "$tmp/out" ||
  { echo "FAIL: what was replayed"; exit 1; }
python3 - "$tmp/r.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
assert sorted(r["modes"]) == ["cmt", "default", "pinned"], r
assert all(m["wrong_bytes"] == 0 and len(m["runs_s"]) == 2 for m in r["modes"].values()), r
assert r["bytes"] == 5000001 + 7340033 + 4194304 + 3000000 + 6291459 + 2097152 + 1048577, r
print("ok: every mode replayed, every byte right")
PY
# The window from 3.5 ms to 4.5 ms after the first call holds the two device-to-host copies at 5 ms.
"$cmt" bench replay "$tmp/small.tsv" --window 0.0035:0.0045 --rounds 1 > "$tmp/out" 2>&1 &&
  grep -q "2 thread(s), 2 copies, 8388611 bytes" "$tmp/out" ||
  { echo "FAIL: a window's copies: $(cat "$tmp/out")"; exit 1; }
echo "ok: a window replays its copies alone"
# A version-4 trace (host addresses): the buffer the program copied three times (to the GPU twice,
# back once) is replayed from one buffer of its own, under hot buffers too, every byte checked.
row4() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\ttaken\t%s\t0x0\t0\t-1\t0\t-1\t-1\t%s\n' "$@"; }
{
  echo '# cmt trace 4 pid=9 exe=/bin/offload calls=4 dropped=0'
  printf '%s\tlane\tlane_built\tfirst_dma_ns\tlane_wait_ns\thost_at\n' "$head"
  row4 1000000 2000000 9 cudaMemcpyAsync h2d 3000001 3000001 resident 0x7f0000001010
  row4 3000000 4000000 9 cudaMemcpyAsync h2d 3000001 3000001 resident 0x7f0000001010
  row4 5000000 6000000 9 cudaMemcpyAsync d2h 3000001 3000001 resident 0x7f0000001010
  row4 7000000 8000000 9 cudaMemcpyAsync h2d 1048576 1048576 resident 0x7f0000400010
} > "$tmp/v4.tsv"
CMT_REGISTER=hot CMT_STATS="$tmp/hot.%p.json" "$cmt" bench replay "$tmp/v4.tsv" --rounds 2 > "$tmp/out" 2>&1 &&
  grep -q "host buffers: 1 the program copied again (3000001 bytes), each replayed from its own, 3 copies from them" "$tmp/out" ||
  { echo "FAIL: a version-4 trace: $(cat "$tmp/out")"; exit 1; }
cat "$tmp/out"
# The replay preloads libcmt-release.so under hot buffers, as cmt run does, so its buffer is
# registered (without it, cmt warned and staged every copy).
python3 - "$tmp" <<'PY' || exit 1
import glob, json, sys
regs = sum(json.load(open(f)).get("hot_buffers", {}).get("registrations", 0)
           for f in glob.glob(sys.argv[1] + "/hot.*.json"))
assert regs >= 1, f"{regs} registrations under CMT_REGISTER=hot"
print(f"ok: {regs} registration(s) under hot buffers")
PY
echo "ok: a buffer copied again is replayed from its own"
# A version-5 trace: each copy after the first waited on its stream for 30 ms of the program's
# kernels (gpu_gap_ns) with no CPU work between the calls. Replayed with that GPU work, a round of
# its 4 synchronous-on-stream copies takes at least 90 ms more than with the streams left idle.
row5() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\ttaken\t%s\t0x0\t0\t-1\t0\t-1\t-1\t%s\t%s\t%s\n' "$@"; }
{
  echo '# cmt trace 5 pid=9 exe=/bin/infer calls=4 dropped=0'
  printf '%s\tlane\tlane_built\tfirst_dma_ns\tlane_wait_ns\thost_at\tgpu_ns\tgpu_gap_ns\n' "$head"
  row5 1000000 2000000 9 cudaMemcpyAsync h2d 4194304 4194304 resident 0x7f0000001000 900000 -1
  row5 2000000 33000000 9 cudaMemcpyAsync h2d 4194304 4194304 resident 0x7f0000401000 900000 30000000
  row5 33000000 64000000 9 cudaMemcpyAsync h2d 4194304 4194304 resident 0x7f0000801000 900000 30000000
  row5 64000000 95000000 9 cudaMemcpyAsync h2d 4194304 4194304 resident 0x7f0000c01000 900000 30000000
} > "$tmp/v5.tsv"
"$cmt" bench replay "$tmp/v5.tsv" --rounds 3 --modes cmt,pinned --json "$tmp/on.json" > "$tmp/out" 2>&1 &&
  grep -q "GPU work between copies: 90 ms on the streams (3 gaps), replayed as kernels that wait" "$tmp/out" ||
  { echo "FAIL: a version-5 trace: $(cat "$tmp/out")"; exit 1; }
cat "$tmp/out"
"$cmt" bench replay "$tmp/v5.tsv" --rounds 3 --modes cmt,pinned --gpu-work off --json "$tmp/off.json" > "$tmp/out" 2>&1 &&
  grep -q "not replayed (--gpu-work off)" "$tmp/out" ||
  { echo "FAIL: --gpu-work off: $(cat "$tmp/out")"; exit 1; }
python3 - "$tmp/on.json" "$tmp/off.json" <<'PY' || exit 1
import json, sys
on, off = (json.load(open(f)) for f in sys.argv[1:3])
for m in ("cmt", "pinned"):
    a, b = on["modes"][m]["median_s"], off["modes"][m]["median_s"]
    assert a >= b + 0.085, f"{m}: a round took {a:.4f} s with the GPU work, {b:.4f} s without"
    assert on["modes"][m]["wrong_bytes"] == 0
print("ok: the streams' recorded work replayed, each copy waiting for it")
PY
