#!/bin/sh
# `cmt bench copy` end to end on a GPU, small: every case, bytes checked (exit 0), and its JSON,
# CSV and SVG plot written and consistent; then cmt-bench-dma, every mode. Exit 77 without a GPU.
set -u
cmt=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmt" bench copy --sizes 4M,8M --reps 2 --cases plain,fresh,mmap --file-dir "$tmp" \
  --json "$tmp/r.json" --csv "$tmp/r.csv" --plot "$tmp/r.svg" > "$tmp/out" 2>&1; rc=$?
cat "$tmp/out"
grep -q "no CUDA GPU found" "$tmp/out" && exit 77
[ $rc -eq 0 ] || { echo "FAIL: cmt bench copy exited $rc"; exit 1; }
python3 - "$tmp" <<'PY' || exit 1
import csv, json, sys
d = sys.argv[1]
r = json.load(open(d + "/r.json"))
assert r["wrong_copies"] == 0, r["wrong_copies"]
kinds = sorted({(x["case"], x["direction"]) for x in r["results"]})
assert kinds == [("fresh", "d2h"), ("mmap", "h2d"), ("plain", "d2h"), ("plain", "h2d")], kinds
rows = list(csv.DictReader(open(d + "/r.csv")))
assert len(rows) == len(r["results"]) == 8, len(rows)
assert all(float(x["cmt_median_gbps"]) > 0 for x in rows)
svg = open(d + "/r.svg").read()
assert svg.count('class="curve"') == 6, svg.count('class="curve"')
print("ok: JSON, CSV and plot agree;", len(rows), "rows")
PY
# cmt-bench-dma, built beside cmt: every mode runs and reports a rate.
"$(dirname "$cmt")/cmt-bench-dma" --sizes 4M --reps 1 --cpu-threads 1 --json "$tmp/d.json" ||
  { echo "FAIL: cmt-bench-dma"; exit 1; }
python3 - "$tmp/d.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))["results"]
modes = [(x["direction"], x["mode"]) for x in r]
# No device-to-host form: the CPU reads write-combined memory very slowly; the kernel only pulls.
host_only = {"wc", "pull", "pullnt", "pullstaged"}
device_only = {"regfresh"}  # a fresh buffer has nothing to send
every = 21
assert len(modes) == 2 * every - len(host_only) - len(device_only), modes
assert all(("h2d", m) in modes and ("d2h", m) not in modes for m in host_only), modes
assert all(("d2h", m) in modes and ("h2d", m) not in modes for m in device_only), modes
assert all(x["median_gbps"] > 0 for x in r), r
print("ok: cmt-bench-dma ran", len(r), "measurements")
PY
# The staged pipeline with memcpy, whole pieces per thread (more threads than units), the ring
# flushed from the caches after each unit, and the kernel pulling.
"$(dirname "$cmt")/cmt-bench-dma" --sizes 6M --chunk 1M --slots 3 --reps 1 --cpu-threads 3 \
  --modes staged,staged2,pullstaged --staging memcpy --units 1 --flush-ring --json "$tmp/s.json" ||
  { echo "FAIL: cmt-bench-dma staged with memcpy"; exit 1; }
python3 - "$tmp/s.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["staging"] == "memcpy" and d["units_per_piece"] == 1 and d["flush_ring"] is True, d
assert len(d["results"]) == 5 and all(x["median_gbps"] > 0 for x in d["results"]), d
print("ok: staged modes with memcpy, whole pieces, flushed ring")
PY
# Through the write-combined ring, drained with streaming loads (the bench checks the bytes).
"$(dirname "$cmt")/cmt-bench-dma" --sizes 6M --chunk 1M --slots 3 --reps 1 --cpu-threads 3 \
  --modes staged,pullstaged --ring wc --json "$tmp/w.json" ||
  { echo "FAIL: cmt-bench-dma staged through the write-combined ring"; exit 1; }
python3 - "$tmp/w.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ring"] == "wc", d
assert [(x["direction"], x["mode"]) for x in d["results"]] == [("h2d", "staged"), ("d2h", "staged")], d
print("ok: staged through the write-combined ring")
PY
