#!/bin/bash
# Statistics of a process tree (issue 31, finding 8): with %p in CMT_STATS every process of a
# command writes its own file, and `cmt run -v` ends with their sum. Two programs linked against
# the fake libcuda, one after the other in one shell: two files, and totals of two processes that
# add up to both files' copies.
# usage: stats_tree.sh CMT LIBCMT APP
set -u
cmt=$1
lib=$2
app=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CMT_LOG=error CMT_STATS="$tmp/s.%p.json" LD_PRELOAD=$lib \
  sh -c "'$app' 2 20 7 > /dev/null && '$app' 2 20 8 > /dev/null" || { echo "FAIL: the programs failed"; exit 1; }
files=$(ls "$tmp"/s.*.json 2>/dev/null | wc -l)
[ "$files" -eq 2 ] || { echo "FAIL: $files statistics files, want 2 (one per process)"; ls "$tmp"; exit 1; }
CMT_LOG=error "$cmt" run -v -- sh -c "'$app' 2 20 7 > /dev/null && '$app' 2 20 8 > /dev/null" \
  > "$tmp/run.out" 2> "$tmp/run.err" || { echo "FAIL: cmt run -v failed"; tail "$tmp/run.err"; exit 1; }
totals=$(grep "cmt run: the command's" "$tmp/run.err")
echo "$totals"
# cmt tune watches the whole tree too (it said "made no pageable copy" when the last process to
# exit had made none); on a CPU machine it stops after watching, for want of a GPU.
CMT_LOG=error timeout 120 "$cmt" tune --dry-run -- sh -c "'$app' 2 20 7 > /dev/null; '$app' 1 0 9 > /dev/null" \
  > "$tmp/tune.out" 2>&1
grep "its copies (share of bytes)" "$tmp/tune.out" || { echo "FAIL: cmt tune saw no copies"; cat "$tmp/tune.out"; exit 1; }
python3 - "$tmp" "$totals" <<'PY'
import glob, json, re, sys
tmp, totals = sys.argv[1], sys.argv[2]
files = [json.load(open(f)) for f in glob.glob(f"{tmp}/s.*.json")]
each = [f["taken"]["h2d"]["calls"] + f["taken"]["d2h"]["calls"] for f in files]
print(f"each process's taken copies, run with CMT_STATS=...%p: {each}")
m = re.search(r"processes that used CUDA: (\d+); copies taken: H2D (\d+) .* D2H (\d+) ", totals)
ok = all(n > 0 for n in each) and m and int(m.group(1)) == 2 and int(m.group(2)) + int(m.group(3)) > 0
# The copy threads' CPU time, summed over the files, per GB taken.
cpu = sum(f["copy_threads"]["cpu_seconds"] for f in files)
t = re.search(r"cmt's copy threads ([0-9.]+) CPU s \(([0-9.]+) s per GB taken\)", totals)
print(f"copy threads' CPU in the files: {cpu:.3f} s; the sum says {t.group(0) if t else None}")
ok = ok and t and cpu > 0 and float(t.group(2)) > 0
print("ok: one file per process, and cmt run -v sums the tree" if ok else "FAIL: totals of the tree")
sys.exit(0 if ok else 1)
PY
