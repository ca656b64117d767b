#!/bin/sh
# The result scripts still read the committed results: a table and a plot with six curves. And
# compare.py runs each variant with its own settings, in every round, and refuses wrong bytes
# (against a stand-in for cmt-bench-copy whose ratio is the CMT_RAMP it was given).
set -eu
src=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Every committed copy result (archive included) with a 1 GiB host-to-device row of plain copies.
copies=$(python3 - "$src/bench/results" <<'PY'
import glob, json, os, sys
for p in sorted(glob.glob(os.path.join(sys.argv[1], "**", "*.json"), recursive=True)):
    r = json.load(open(p))
    rows = r.get("results", []) if r.get("benchmark") == "cmt-bench-copy" else []
    if any(x.get("case", "plain") == "plain" and x["bytes"] == 1 << 30 and x["direction"] == "h2d"
           for x in rows):
        print(p)
PY
)
[ -n "$copies" ] || { echo "FAIL: no copy result found under bench/results"; exit 1; }
for json in $copies; do
  python3 "$src/bench/summarize.py" "$json" | grep -q "| 1 GiB | h2d |"
  python3 "$src/bench/plot.py" "$json" "$out/plot.svg"
  n=$(grep -c 'class="curve"' "$out/plot.svg")
  [ "$n" -eq 6 ] || { echo "FAIL: $json gave $n curves, expected 6"; exit 1; }
done
echo "ok: summarize.py and plot.py read every copy result ($(echo $copies | wc -w))"
# Every committed concurrent result draws: a bar per mode and pattern (two for both ways).
for json in $(grep -l '"benchmark": "cmt-bench-concurrent"' "$src"/bench/results/*.json); do
  python3 "$src/bench/plot_concurrent.py" "$json" "$out/c.svg"
  python3 - "$json" "$out/c.svg" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
want = sum(3 * (2 if x["pattern"] == "both" else 1) for x in r["results"])
bars = open(sys.argv[2]).read().count('<rect x=') - 3  # less the legend's three
assert bars == want, (sys.argv[1], bars, want)
PY
done
# A result over several GPU sets (as `cmt bench topo` writes) names each set under its bars.
python3 - "$out/topo.json" <<'PY'
import json, sys
cell = lambda t: {"total_gbps": t, "h2d_gbps": t / 2, "d2h_gbps": t / 2, "per_gpu_gbps": [t]}
rows = [{"gpus": g, "bytes": 256 << 20, "pattern": p, "default": cell(5), "cmt": cell(40), "pinned": cell(50)}
        for g in ([0], [1], [0, 1]) for p in ("h2d", "both")]
json.dump({"benchmark": "cmt-bench-concurrent", "date": "2026-12-01T00:00:00Z", "gpu": "fake",
           "threads": 2, "stream": "own", "staging_bound_gbps": 45, "results": rows}, open(sys.argv[1], "w"))
PY
python3 "$src/bench/plot_concurrent.py" "$out/topo.json" "$out/topo.svg"
for label in "GPU 0<" "GPU 1<" "GPU 0,1<" "per GPU"; do
  grep -q "$label" "$out/topo.svg" || { echo "FAIL: the topo plot lacks '$label'"; exit 1; }
done

cat > "$out/fake-bench" <<'PY'
#!/usr/bin/env python3
import json, os, sys
ratio = float(os.environ.get("CMT_RAMP", "0.5"))
case = sys.argv[sys.argv.index("--cases") + 1]
rows = [{"case": case, "bytes": 16 << 20, "direction": d, "cmt": {"median_gbps": 40 * ratio},
         "cmt_over_pinned": ratio, "cmt_over_default": 4 * ratio} for d in ("h2d", "d2h")]
doc = {"machine": {"gpu": "fake"}, "wrong_copies": int(os.environ.get("CMT_WRONG", "0")), "results": rows}
json.dump(doc, open(sys.argv[sys.argv.index("--json") + 1], "w"))
PY
chmod +x "$out/fake-bench"
python3 "$src/bench/compare.py" "$out/fake-bench" on:CMT_RAMP=1 off:CMT_RAMP=0 as-is --rounds 3 \
  --json "$out/c.json" > "$out/c.txt"
python3 - "$out/c.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
got = {(s["variant"], s["direction"]): s["cmt_over_pinned"] for s in d["summary"]}
assert got == {("on", "h2d"): 1.0, ("on", "d2h"): 1.0, ("off", "h2d"): 0.0, ("off", "d2h"): 0.0,
               ("as-is", "h2d"): 0.5, ("as-is", "d2h"): 0.5}, got
assert all(len(runs) == 3 for runs in d["runs"].values()), d["runs"].keys()
PY
grep -Eq "16M +h2d " "$out/c.txt" || { cat "$out/c.txt"; echo "FAIL: no table from compare.py"; exit 1; }
python3 "$src/bench/compare.py" "$out/fake-bench" on:CMT_RAMP=1 --rounds 1 --cases fresh \
  --versus default > "$out/f.txt"
grep -Eq "16M +d2h fresh +4.00" "$out/f.txt" || { cat "$out/f.txt"; echo "FAIL: --cases/--versus"; exit 1; }
# A variant may run another build's benchmark (NAME@BENCH): here one that always reports 0.25.
sed 's/ratio = float(os.environ.get("CMT_RAMP", "0.5"))/ratio = 0.25/' "$out/fake-bench" > "$out/other-bench"
chmod +x "$out/other-bench"
python3 "$src/bench/compare.py" "$out/fake-bench" "old@$out/other-bench:CMT_RAMP=1" new:CMT_RAMP=1 \
  --rounds 2 --json "$out/b.json" > /dev/null
python3 - "$out/b.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
got = {(s["variant"], s["direction"]): s["cmt_over_pinned"] for s in d["summary"]}
assert got == {("old", "h2d"): 0.25, ("old", "d2h"): 0.25, ("new", "h2d"): 1.0, ("new", "d2h"): 1.0}, got
assert d["variants"]["old"]["bench"].endswith("other-bench"), d["variants"]
PY
if python3 "$src/bench/compare.py" "$out/fake-bench" bad:CMT_WRONG=1 > /dev/null 2>&1; then
  echo "FAIL: compare.py accepted wrong bytes"; exit 1
fi
echo "ok: compare.py"
# offload_passes.py cuts the committed same-process offload trace (lab/NOTES.md 82) into its ten
# passes of each mode, and reads the thread's time between calls alike in all three.
python3 "$src/bench/lab/offload_passes.py" \
  "$src/bench/results/archive/2026-12-06/s38/call4/same-auto.tsv.gz" > "$out/passes.txt"
for m in cmt pinned default; do
  grep -q "^$m: 10 passes" "$out/passes.txt" || { echo "FAIL: offload_passes.py, $m:"; cat "$out/passes.txt"; exit 1; }
done
python3 - "$out/passes.txt" <<'PY'
import re, sys
between = [float(m) for m in re.findall(r"between ([0-9.]+),", open(sys.argv[1]).read())]
assert len(between) == 3 and max(between) / min(between) < 1.05, between
PY
echo "ok: offload_passes.py"
