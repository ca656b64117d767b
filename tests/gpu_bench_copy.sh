#!/bin/sh
# `cmt bench copy` end to end on a GPU, small: every case, bytes checked (exit 0), and its JSON,
# CSV and SVG plot written and consistent; the batch API; then cmt-bench-dma, every mode. Exit 77 without a GPU.
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
# The batch API (cudaMemcpyBatchAsync in 3 parts): bytes checked, cmt's copies taken in batches.
CMT_STATS="$tmp/b-stats.json" "$cmt" bench copy --api batch --batch-copies 3 --sizes 8M,32M \
  --reps 2 --json "$tmp/b.json" > "$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: cmt bench copy --api batch"; exit 1; }
# The same parts listed last to first: none continues the one before, so cmt takes each.
CMT_STATS="$tmp/r-stats.json" "$cmt" bench copy --api batch --batch-copies 3 --batch-order reverse \
  --sizes 8M,32M --reps 2 --json "$tmp/r.json" > "$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: --batch-order reverse"; exit 1; }
python3 - "$tmp" <<'PY' || exit 1
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/b.json"))
s = json.load(open(d + "/b-stats.json"))
assert r["api"] == "batch" and r["batch_copies"] == 3 and r["wrong_copies"] == 0, r
rr = json.load(open(d + "/r.json"))
sr = json.load(open(d + "/r-stats.json"))
assert rr["batch_order"] == "reverse" and rr["wrong_copies"] == 0, rr
one, each = s["taken_via"]["batch"], sr["taken_via"]["batch"]
# In order the three parts are one copy; reversed, three.
assert one > 0 and each == 3 * one, (one, each)
print("ok: --api batch,", one, "copies taken in batches; parts reversed,", each)
PY
# Concurrent mode: two threads each way and both, bytes checked, JSON and plot written.
"$cmt" bench copy --threads 2 --sizes 8M --seconds 0.3 --rounds 1 --json "$tmp/c.json" \
  --plot "$tmp/c.svg" > "$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: cmt bench copy --threads"; exit 1; }
python3 - "$tmp" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1] + "/c.json"))
assert r["wrong_windows"] == 0 and r["staging_bound_gbps"] > 0, r
assert [x["pattern"] for x in r["results"]] == ["h2d", "d2h", "both"], r["results"]
assert all(x[m]["total_gbps"] > 0 for x in r["results"] for m in ("default", "cmt", "pinned"))
# The process's CPU per GB: two threads spin in cudaStreamSynchronize at least part of a window,
# so above nothing; under 10 s/GB (that would be two cores for a window moving 0.2 GB/s).
assert all(0 < x[m]["cpu_s_per_gb"] < 10 for x in r["results"] for m in ("default", "cmt", "pinned")), r
# A copy's median and the slowest first copy: an 8 MiB copy takes over 10 us (800 GB/s) and
# under a second.
assert all(10 < x[m]["copy_median_us"] < 1e6 and 10 < x[m]["first_copy_us_max"] < 1e6
           for x in r["results"] for m in ("default", "cmt", "pinned")), r
assert "<rect" in open(sys.argv[1] + "/c.svg").read()
print("ok: concurrent mode, 3 patterns")
PY
# Processes mode: one and three processes at once, each way, and three both ways (one is skipped
# there), bytes checked in every
# process, the JSON's cells in order.
"$cmt" bench copy --processes 1,3 --sizes 8M --seconds 0.2 --rounds 2 --json "$tmp/m.json" \
  > "$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: cmt bench copy --processes"; exit 1; }
python3 - "$tmp" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1] + "/m.json"))
assert r["benchmark"] == "cmt-bench-processes" and r["wrong_windows"] == 0, r
cells = [(x["pattern"], x["processes"]) for x in r["results"]]
assert cells == [("h2d", 1), ("h2d", 3), ("d2h", 1), ("d2h", 3), ("both", 3)], cells
for x in r["results"]:
    for m in ("default", "cmt", "pinned"):
        y = x[m]
        assert 0 < y["slowest_process_gbps"] <= y["fastest_process_gbps"], (x, m)
        assert y["min_gbps"] <= y["total_gbps"] <= y["max_gbps"] and 0 < y["cpu_s_per_gb"] < 10, (x, m)
        # Each way's share: all of it one way, or (both) some of it each way.
        up, down = y["h2d_gbps"], y["d2h_gbps"]
        assert (down == 0) if x["pattern"] == "h2d" else (up == 0) if x["pattern"] == "d2h" else (up > 0 and down > 0), (x, m)
print("ok: processes mode,", len(cells), "cells")
PY
# cmt bench topo: every GPU alone (and together, where there are several), bytes checked.
"$cmt" bench topo --sizes 8M --seconds 0.3 --rounds 1 --json "$tmp/t.json" > "$tmp/out" 2>&1 ||
  { cat "$tmp/out"; echo "FAIL: cmt bench topo"; exit 1; }
python3 - "$tmp/t.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
sets = sorted({tuple(x["gpus"]) for x in r["results"]})
want = [(d,) for d in range(r["gpus"])] + ([tuple(range(r["gpus"]))] if r["gpus"] > 1 else [])
assert r["wrong_windows"] == 0 and all(s in sets for s in want), (sets, want)
assert all(len(x["cmt"]["per_gpu_gbps"]) == len(x["gpus"]) for x in r["results"])
print("ok: cmt bench topo, sets", sets)
PY
# cmt bench p2p: the matrices, square over this machine's GPUs, every pair's bytes right; where
# there are several, cudaMemcpyPeer through the host for every ordered pair, CUDA's and cmt's.
"$cmt" bench p2p --bytes 8M --reps 2 --sizes 1M,8M --rounds 2 --json "$tmp/p.json" > "$tmp/out" 2>&1 ||
  { cat "$tmp/out"; echo "FAIL: cmt bench p2p"; exit 1; }
python3 - "$tmp/p.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
n = r["gpus"]
assert r["wrong_copies"] == 0
for mode in ("disabled", "enabled"):
    for key, m in r[mode].items():
        assert len(m) == n and all(len(row) == n and all(v > 0 for v in row) for row in m), (mode, key)
pairs = sorted({(x["from"], x["to"]) for x in r["through_host"]})
assert pairs == [(i, j) for i in range(n) for j in range(n) if i != j], pairs
assert all(x["bytes_ok"] and x["cuda_median"] > 0 and x["cmt_median"] > 0 for x in r["through_host"])
assert r["cmt_loaded"] and r["taken_with_peer_access"] == 0, r
print("ok: cmt bench p2p,", n, "GPU(s),", len(r["through_host"]), "through-host rows")
PY
# cmt-bench-dma (the lab's), built beside cmt: every mode runs each way and reports a rate, with
# either staging store.
for staging in nt memcpy; do
  "$(dirname "$cmt")/cmt-bench-dma" --sizes 4M --chunk 1M --slots 3 --reps 1 --cpu-threads 2 \
    --staging $staging --json "$tmp/d.json" || { echo "FAIL: cmt-bench-dma --staging $staging"; exit 1; }
  python3 - "$tmp/d.json" "$staging" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
modes = [(x["direction"], x["mode"]) for x in d["results"]]
every = ["one", "chain", "pieces", "busy", "busynt", "staged", "pageable"]
assert d["staging"] == sys.argv[2], d["staging"]
assert sorted(modes) == sorted((dr, m) for dr in ("h2d", "d2h") for m in every), modes
assert all(x["median_gbps"] > 0 for x in d["results"]), d["results"]
print("ok: cmt-bench-dma ran", len(modes), "measurements, staging", sys.argv[2])
PY
done
