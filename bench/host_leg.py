#!/usr/bin/env python3
"""The host leg on this machine, side by side, bytes checked:

  fill    cmt-bench-host fill under `cmt run`: memmove of a pageable 1 GiB array into a
          cudaHostAlloc buffer, then cudaMemcpy to the GPU; libc's memmove (the thread opted out)
          against cmt's, rounds alternating in one process, and the DMA alone as the ceiling.
  small   a 64-byte memcpy through the PLT in a tight loop: ns per call without cmt, under
          `cmt run` (libcmt.so and libcmt-host.so, whose hooks take every memcpy), and under
          `cmt run` with CMT_HOST_COPY=off CMT_HOST_FILL=off (libcmt.so alone); processes
          alternating.
  python  a CPU-bound Python program (import torch, small tensor work): seconds without cmt and
          under `cmt run`, processes alternating.
  fresh   cmt-bench-host fresh under `cmt run`, 64 MiB and 1 GiB: a new buffer zero-filled and
          then the target of a device-to-host copy, default against cmt in one process, and the
          memset of memory already faulted in.

usage: host_leg.py CMT CMT_BENCH_HOST [--rounds N] [--parts fill,small,python,fresh] [--json FILE]
                   [--versus OTHER_CMT]

With --versus, small and python also run under another build's `cmt run` (e.g. the commit before
a change), in the same alternation: its figures are the "versus" ones.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine_meta  # noqa: E402
from script_args import name_list  # noqa: E402  (bench/script_args.py)

PYTHON_WORK = """
import torch
x = torch.randn(64, 64)
for _ in range(30000):
    x = torch.tanh(x @ x.T * 0.01 + 1.0)
    y = x.clone().view(-1)[:100].tolist()
"""


def spread(v):
    return (max(v) - min(v)) / statistics.median(v)


PARTS = ("fill", "small", "python", "fresh")


def main():
    p = argparse.ArgumentParser(prog="host_leg.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmt", metavar="CMT")
    p.add_argument("bench", metavar="CMT_BENCH_HOST")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--parts", type=name_list(PARTS, "part"), default=",".join(PARTS), metavar="a,b")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--versus", metavar="OTHER_CMT")
    args = p.parse_args()
    cmt, bench, rounds, parts = args.cmt, args.bench, args.rounds, args.parts
    doc = dict(machine_meta.meta(cmt, sys.argv), rounds=rounds)

    if "fill" in parts:
        fill(cmt, bench, rounds, doc)
    versus = args.versus
    if "small" in parts:
        small(cmt, bench, rounds, doc, versus)
    if "python" in parts:
        python(cmt, rounds, doc, versus)
    if "fresh" in parts:
        fresh(cmt, bench, rounds, doc)
    if args.json:
        json.dump(doc, open(args.json, "w"), indent=2)
    ok = (doc.get("fill", {}).get("wrong", 0) == 0 and
          all(r.get("wrong", 1) == 0 for r in doc.get("fresh", {}).values()))
    return 0 if ok else 1


def fill(cmt, bench, rounds, doc):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        p = subprocess.run([cmt, "run", "--", bench, "fill", "--reps", str(rounds), "--json", f.name],
                           capture_output=True, text=True)
        print(p.stdout, p.stderr, flush=True)
        doc["fill"] = json.load(open(f.name)) if p.returncode == 0 else {"error": p.stderr[-500:], "wrong": 1}


def small(cmt, bench, rounds, doc, versus=None):
    runs = {"without": [], "with": [], "host_off": []}
    if versus:
        runs["versus"] = []
    # Runs of this loop spread by 30% on the H200's virtual machine: at least 9 rounds, each
    # process on the same core (the last this one may use).
    core = str(max(os.sched_getaffinity(0)))
    for _ in range(max(rounds, 9)):
        for mode in runs:
            cmd = ["taskset", "-c", core, bench, "small", "--calls", "300000000"]
            env = dict(os.environ)
            if mode != "without":
                cmd = [versus if mode == "versus" else cmt, "run", "--"] + cmd
            if mode == "host_off":  # libcmt.so alone: neither copies nor fills, so no hook
                env["CMT_HOST_COPY"] = "off"
                env["CMT_HOST_FILL"] = "off"
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
            runs[mode].append(json.loads(out.strip().splitlines()[-1])["ns_per_call"])
    w, c, o = (statistics.median(runs[m]) for m in ("without", "with", "host_off"))
    doc["small"] = {"size": 64, "without_ns": w, "with_ns": c, "overhead": c / w - 1,
                    "host_off_ns": o, "host_off_overhead": o / w - 1,
                    "without_runs": runs["without"], "with_runs": runs["with"],
                    "host_off_runs": runs["host_off"]}
    line = (f"64-byte memcpy: {w:.3f} ns without cmt, {c:.3f} ns under cmt run "
            f"({100 * (c / w - 1):+.1f}%), {o:.3f} ns with host copies and fills off "
            f"({100 * (o / w - 1):+.1f}%)")
    if versus:
        v = statistics.median(runs["versus"])
        doc["small"].update(versus=versus, versus_ns=v, versus_overhead=v / w - 1,
                            versus_runs=runs["versus"])
        line += f", {v:.3f} ns under the other build's cmt run ({100 * (v / w - 1):+.1f}%)"
    print(line, flush=True)


def python(cmt, rounds, doc, versus=None):
    py = {"without": [], "with": []}
    if versus:
        py["versus"] = []
    for _ in range(rounds):
        for mode in py:
            cmd = [sys.executable, "-c", PYTHON_WORK]
            if mode != "without":
                cmd = [versus if mode == "versus" else cmt, "run", "--"] + cmd
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True)
            py[mode].append(time.perf_counter() - t0)
    w, c = statistics.median(py["without"]), statistics.median(py["with"])
    doc["python"] = {"without_s": w, "with_s": c, "overhead": c / w - 1,
                     "without_runs": py["without"], "with_runs": py["with"],
                     "spread_without": spread(py["without"]), "spread_with": spread(py["with"])}
    line = f"CPU-bound Python: {w:.2f} s without cmt, {c:.2f} s with ({100 * (c / w - 1):+.1f}%)"
    if versus:
        v = statistics.median(py["versus"])
        doc["python"].update(versus_s=v, versus_overhead=v / w - 1, versus_runs=py["versus"])
        line += f", {v:.2f} s under the other build's ({100 * (v / w - 1):+.1f}%)"
    print(line, flush=True)


def fresh(cmt, bench, rounds, doc):
    doc["fresh"] = {}
    for size in ("64M", "1G"):
        with tempfile.NamedTemporaryFile(suffix=".json") as f, \
                tempfile.NamedTemporaryFile(suffix=".json") as stats:
            p = subprocess.run([cmt, "run", "--", bench, "fresh", "--bytes", size, "--reps",
                                str(rounds), "--json", f.name], capture_output=True, text=True,
                               env=dict(os.environ, CMT_STATS=stats.name))
            print(p.stdout, p.stderr, flush=True)
            doc["fresh"][size] = (json.load(open(f.name)) if p.returncode == 0
                                  else {"error": p.stderr[-500:], "wrong": 1})
            # cmt's own count of the fills it took: the cmt rounds' memsets must all be there.
            try:
                doc["fresh"][size]["cmt_fills"] = json.load(open(stats.name))["host_copies"]["fills"]
            except (ValueError, KeyError):
                doc["fresh"][size]["cmt_fills"] = None


if __name__ == "__main__":
    sys.exit(main())
