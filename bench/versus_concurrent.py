#!/usr/bin/env python3
"""Two builds' concurrent benchmark side by side: `cmt bench copy --threads N` of each build,
processes alternating (before, after, after, before, ...), each run a JSON of cmt-bench-concurrent.
Prints, for every configuration and pattern, cmt's aggregate GB/s of every run of each build, the
ratio of their medians (after / before), and the spread within each build's own runs (the noise a
difference must pass). The default and pinned columns are printed too: a change in the library
should move cmt's column alone.

A run cut short (a device call's time limit) leaves every finished run's JSON in DIR:
`versus_concurrent.py --runs DIR [--json FILE]` summarizes those, each configuration over the
runs both builds finished.

`--only NAME,...` runs those configurations alone (a row in doubt, many rounds in little time).

usage: versus_concurrent.py BEFORE_CMT AFTER_CMT --rounds N --out DIR [--only NAME,...] [--json FILE]
       versus_concurrent.py --runs DIR [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from script_args import name_list  # bench/script_args.py, beside this script

CONFIGS = {  # name: cmt bench copy's arguments (a short form of device_check.sh concurrent)
    "8x256M": ["--threads", "8", "--sizes", "256M", "--seconds", "1", "--rounds", "2"],
    "2x1G": ["--threads", "2", "--sizes", "1G", "--patterns", "both", "--seconds", "1.5",
             "--rounds", "2"],
    "8x256M-null": ["--threads", "8", "--sizes", "256M", "--patterns", "both", "--stream", "null",
                    "--seconds", "1", "--rounds", "2"],
    "1x16M": ["--threads", "1", "--sizes", "16M", "--patterns", "h2d,d2h", "--seconds", "1",
              "--rounds", "2"],
}


def run(cmt, name, path):
    args = [cmt, "bench", "copy"] + CONFIGS[name] + ["--json", path]
    p = subprocess.run(args, capture_output=True, text=True, timeout=200,
                       env=dict(os.environ, CMT_CONFIGS_DIR=""))
    if p.returncode != 0:
        sys.exit(f"versus_concurrent.py: {' '.join(args)} failed ({p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return json.load(open(path))


def spread(v):
    return (max(v) - min(v)) / statistics.median(v) if v and statistics.median(v) else 0


def finished_runs(out):
    """The runs a previous invocation left in `out` (vc-SIDE-ROUND-CONFIG.json), in round order."""
    runs = {"before": {n: [] for n in CONFIGS}, "after": {n: [] for n in CONFIGS}}
    for f in sorted(os.listdir(out)):
        side, r, name = f[len("vc-"):-len(".json")].split("-", 2)
        runs[side][name].append((int(r), json.load(open(os.path.join(out, f)))))
    return {side: {n: [d for _, d in sorted(v, key=lambda x: x[0])] for n, v in by.items()}
            for side, by in runs.items()}


def parse_args(argv):
    """The command line, by argparse: an unknown flag or config is refused, named."""
    p = argparse.ArgumentParser(prog="versus_concurrent.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", nargs="?", metavar="BEFORE_CMT")
    p.add_argument("after", nargs="?", metavar="AFTER_CMT")
    p.add_argument("--runs", metavar="DIR", help="summarize the finished runs in DIR instead")
    p.add_argument("--rounds", type=int)
    p.add_argument("--out", metavar="DIR")
    p.add_argument("--only", type=name_list(list(CONFIGS), "config"), metavar="NAME,...")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    if not args.runs and not (args.before and args.after and args.rounds and args.out):
        p.error("BEFORE_CMT AFTER_CMT --rounds N --out DIR are required (or --runs DIR)")
    return args


def main():
    args = parse_args(sys.argv[1:])
    if args.runs:
        before = after = None
        rounds = None
        runs = finished_runs(args.runs)
    else:
        before, after, rounds, out = args.before, args.after, args.rounds, args.out
        for n in list(CONFIGS):
            if args.only and n not in args.only:
                del CONFIGS[n]
        os.makedirs(out, exist_ok=True)
        runs = {"before": {n: [] for n in CONFIGS}, "after": {n: [] for n in CONFIGS}}
        for r in range(rounds):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for side in order:
                cmt = before if side == "before" else after
                for name in CONFIGS:
                    runs[side][name].append(run(cmt, name, f"{out}/vc-{side}-{r}-{name}.json"))
    summary = []
    print(f"{'config':12} {'pattern':7} {'mode':7} {'before (runs)':>26} {'after (runs)':>26} "
          f"{'after/before':>12} {'spread b/a':>12}")
    for name in CONFIGS:
        if not runs["before"][name] or not runs["after"][name]:
            continue  # cut short before both builds ran it
        first = runs["before"][name][0]["results"]
        for k, row in enumerate(first):
            for mode in ("default", "cmt", "pinned"):
                b = [d["results"][k][mode]["total_gbps"] for d in runs["before"][name]]
                a = [d["results"][k][mode]["total_gbps"] for d in runs["after"][name]]
                ratio = statistics.median(a) / statistics.median(b)
                summary.append({"config": name, "pattern": row["pattern"], "mode": mode,
                                "before": b, "after": a, "ratio": ratio,
                                "spread_before": spread(b), "spread_after": spread(a)})
                print(f"{name:12} {row['pattern']:7} {mode:7} "
                      f"{' '.join(f'{x:5.1f}' for x in b):>26} {' '.join(f'{x:5.1f}' for x in a):>26} "
                      f"{ratio:12.3f} {spread(b):6.2f}/{spread(a):.2f}")
    wrong = sum(d.get("wrong_windows", 0) for side in runs.values() for v in side.values() for d in v)
    print(f"wrong windows: {wrong}")
    if args.json:
        json.dump({"benchmark": "versus_concurrent.py", "before": before, "after": after,
                   "rounds": rounds, "summary": summary, "wrong_windows": wrong},
                  open(args.json, "w"), indent=1)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
