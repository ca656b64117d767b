#!/usr/bin/env python3
"""Prints a cmt-bench-copy JSON result as a Markdown table (for the README and results pages).

usage: bench/summarize.py bench/results/FILE.json [--asleep COLD.json]

--asleep adds a column from the same benchmark run with --gap-us (cmt's threads asleep): its
cmt / default for each size and direction it has, "-" for the others.
"""
import json
import sys


def size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def main():
    args = sys.argv[1:]
    asleep = {}
    if "--asleep" in args:
        at = args.index("--asleep")
        cold = json.load(open(args[at + 1]))
        asleep = {(x.get("case", "plain"), x["bytes"], x["direction"]): x["cmt_over_default"]
                  for x in cold["results"]}
        del args[at:at + 2]
    r = json.load(open(args[0]))
    m = r["machine"]
    print(f"{m['gpu']}, {m['cpu']} ({m['cores']} cores), {r['date']}, {r['reps']} reps, "
          f"median [min-max] GB/s, wrong copies: {r['wrong_copies']}")
    print()
    cases = {"plain": "", "fresh": " (fresh pages)", "mmap": " (mmap'd file)"}
    extra = " threads asleep: cmt / default |" if asleep else ""
    print("| size | dir | default | cmt | pinned | cmt / default | cmt / pinned |" + extra)
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if asleep else ""))
    for x in r["results"]:
        cell = lambda k: (f"{x[k]['median_gbps']:.1f} [{x[k]['min_gbps']:.1f}-{x[k]['max_gbps']:.1f}]")
        what = x["direction"] + cases.get(x.get("case", "plain"), "")
        print(f"| {size(x['bytes'])} | {what} | {cell('default')} | {cell('cmt')} | "
              f"{cell('pinned')} | {x['cmt_over_default']:.2f}x | {x['cmt_over_pinned']:.2f} |", end="")
        if asleep:
            cold = asleep.get((x.get("case", "plain"), x["bytes"], x["direction"]))
            print(f" {cold:.2f}x |" if cold is not None else " - |", end="")
        print()


if __name__ == "__main__":
    main()
