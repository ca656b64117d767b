#!/usr/bin/env python3
"""Compares engine settings on this machine: runs cmt-bench-copy once per variant per round, the
variants in rotating order so drift hits all alike, and prints, per size and direction, each
variant's cmt/pinned ratio (median over rounds, with its range) and cmt's GB/s.

A variant is NAME[@BENCH][:VAR=VALUE,VAR=VALUE] (CMT_* variables); a bare NAME runs with the
environment as it is, and @BENCH runs another build's cmt-bench-copy (with the libcmt.so beside
it) in place of the first argument's. Examples, the ramp against full-size pieces at two sizes,
and two builds of cmt with their built-in defaults:

  bench/compare.py build/cmt-bench-copy --sizes 16M,64M --reps 5 --rounds 3 \\
      ramp on:CMT_RAMP=1 off:CMT_RAMP=0 --json out.json
  bench/compare.py build/cmt-bench-copy before@build-old/cmt-bench-copy:CMT_CONFIGS_DIR= \\
      after:CMT_CONFIGS_DIR= --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def parse_variant(text, default_bench):
    name, _, assignments = text.partition(":")
    name, _, bench = name.partition("@")
    env = {}
    for item in filter(None, assignments.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key.startswith("CMT_"):
            sys.exit(f"compare.py: bad setting '{item}' in variant '{text}' (expected CMT_VAR=VALUE)")
        env[key] = value
    if not name:
        sys.exit(f"compare.py: variant '{text}' has no name")
    bench = bench or default_bench
    if not os.access(bench, os.X_OK):
        sys.exit(f"compare.py: variant '{text}': {bench} is not an executable")
    return name, env, bench


def run_once(bench, sizes, reps, cases, env):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        proc = subprocess.run([bench, "--sizes", sizes, "--reps", str(reps), "--cases", cases, "--json", out],
                              env=dict(os.environ, **env), capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"compare.py: {bench} failed ({proc.returncode}) with {env}:\n{proc.stderr}")
        with open(out) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", help="the cmt-bench-copy executable")
    ap.add_argument("variants", nargs="+", help="NAME[:CMT_VAR=VALUE,...]")
    ap.add_argument("--sizes", default="16M,64M,1G")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cases", default="plain", help="cmt-bench-copy's --cases (plain, fresh, mmap)")
    ap.add_argument("--versus", choices=["pinned", "default"], default="pinned",
                    help="the ratio shown: cmt over pinned memory, or over CUDA's own pageable path")
    ap.add_argument("--json", help="write every run's results and the summary here")
    args = ap.parse_args()
    variants = [parse_variant(v, args.bench) for v in args.variants]

    runs = {name: [] for name, _, _ in variants}
    for r in range(args.rounds):
        for i in range(len(variants)):
            name, env, bench = variants[(i + r) % len(variants)]
            doc = run_once(bench, args.sizes, args.reps, args.cases, env)
            if doc.get("wrong_copies"):
                sys.exit(f"compare.py: variant {name} copied wrong bytes")
            runs[name].append(doc)

    summary = []
    ratio = f"cmt_over_{args.versus}"
    print(f"{'size':>6} {'dir':>10}  " + "  ".join(f"{name:>22}" for name, _, _ in variants))
    first = runs[variants[0][0]][0]["results"]
    for k, row in enumerate(first):
        cells = []
        for name, _, _ in variants:
            ratios = [d["results"][k][ratio] for d in runs[name]]
            gbps = [d["results"][k]["cmt"]["median_gbps"] for d in runs[name]]
            med = statistics.median(ratios)
            summary.append({"variant": name, "case": row.get("case", "plain"), "bytes": row["bytes"],
                            "direction": row["direction"], ratio: med, "min": min(ratios), "max": max(ratios),
                            "cmt_gbps": statistics.median(gbps)})
            cells.append(f"{med:5.2f} ({min(ratios):.2f}-{max(ratios):.2f}) {statistics.median(gbps):5.1f}")
        size = row["bytes"]
        label = f"{size >> 30}G" if size >= 1 << 30 else f"{size >> 20}M" if size >= 1 << 20 else f"{size >> 10}K"
        case = row.get("case", "plain")
        direction = row["direction"] + ("" if case == "plain" else f" {case}")
        print(f"{label:>6} {direction:>10}  " + "  ".join(f"{c:>22}" for c in cells))
    print(f"cells: cmt/{args.versus} median over rounds (range), then cmt GB/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "compare.py", "command": " ".join(sys.argv), "machine": runs[variants[0][0]][0]["machine"], "variants": {name: {"env": env, "bench": bench} for name, env, bench in variants},
                       "summary": summary, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
