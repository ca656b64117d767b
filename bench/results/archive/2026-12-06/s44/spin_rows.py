"""cmt's median GB/s of `cmt bench copy --json` runs side by side: OUT/copy-A-{1,2}.json against
OUT/copy-B-{1,2}.json (usage: spin_rows.py OUT A B), one line a size and direction."""
import json
import sys

out, a, b = sys.argv[1:4]
rows = {}
for n in (a, b):
    for r in (1, 2):
        for x in json.load(open(f"{out}/copy-{n}-{r}.json"))["results"]:
            rows.setdefault((x["bytes"], x["direction"]), {}).setdefault(n, []).append(
                x["cmt"]["median_gbps"])
for (size, way), v in sorted(rows.items()):
    print(f"{size >> 10:7d}K {way}  {a} " + " ".join("%5.1f" % g for g in v[a]) +
          f"   {b} " + " ".join("%5.1f" % g for g in v[b]))
