#!/usr/bin/env python3
"""How fast a loader could be if its copies cost nothing, or ran at the link's rate: its timed
calls (bench/workloads/loaders.py --record leaves, beside each trace, the child's report with each
call's start and end on the trace's clock) cut out of its recorded trace (version 6: the waits for
the GPU are kept), and for each call (issue 32, lab/NOTES.md 84):

  span          the whole call, as the loader timed it
  before/after  its time before its first copy-related call and after its last one ends
  copy calls    time inside host<->device copy calls (cudaMemcpy*, cuMemcpy*), all threads
  host leg      time inside memcpy/memmove/memset and file reads that cmt saw (h2h rows)
  waits         time inside synchronize calls
  no copy       time in which no thread was inside any of those: the program's own work alone
  bound free    no copy: what the call would take if every copy, host-leg call and wait took no
                time and the threads' own work overlapped as it did (exact for one thread)
  bound link    bound free plus the call's host<->device bytes at LINK GB/s one after another:
                the call with copies as fast as pinned memory's, none of them overlapping its work

usage: load_bounds.py TRACE.tsv[.gz] [REPORT.json] [--link GBPS]   (REPORT: TRACE's .json)"""
import gzip
import json
import os
import sys


def rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    header = None
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith("#"):
                if "cmt trace" in line and int(line.split()[3]) < 6:
                    sys.exit(f"{path}: trace version {line.split()[3]}, want 6 (waits kept)")
                continue
            fields = line.rstrip("\n").split("\t")
            if header is None:
                header = fields
                continue
            r = dict(zip(header, fields))
            yield dict(start=int(r["start_ns"]), end=int(r["end_ns"]), tid=r["tid"],
                       api=r["api"], direction=r["direction"], bytes=int(r["bytes"]))


def kind(call):
    if call["direction"] == "wait":
        return "waits"
    if call["direction"] in ("h2d", "d2h"):
        return "copy calls"
    return "host leg" if call["direction"] == "h2h" else None


def union_ns(intervals):
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def window_report(calls, w0, w1, link_gbps):
    inside = [c for c in calls if w0 <= c["start"] and c["end"] <= w1 and kind(c)]
    span = w1 - w0
    out = {"span_ms": span / 1e6, "calls": len(inside), "threads": len({c["tid"] for c in inside})}
    if not inside:
        return out
    for k in ("copy calls", "host leg", "waits"):
        out[k + " ms"] = sum(c["end"] - c["start"] for c in inside if kind(c) == k) / 1e6
    out["before_ms"] = (min(c["start"] for c in inside) - w0) / 1e6
    out["after_ms"] = (w1 - max(c["end"] for c in inside)) / 1e6
    busy = union_ns([(c["start"], c["end"]) for c in inside])
    gpu_bytes = sum(c["bytes"] for c in inside if kind(c) == "copy calls")
    out["gpu_gb"] = gpu_bytes / 1e9
    out["no_copy_ms"] = (span - busy) / 1e6
    out["bound_free_ms"] = out["no_copy_ms"]
    out["bound_link_ms"] = out["no_copy_ms"] + gpu_bytes / link_gbps / 1e6
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    link = float(sys.argv[sys.argv.index("--link") + 1]) if "--link" in sys.argv else 50.0
    if "--link" in sys.argv:
        args.remove(sys.argv[sys.argv.index("--link") + 1])
    trace = args[0]
    report = args[1] if len(args) > 1 else os.path.splitext(
        trace[:-3] if trace.endswith(".gz") else trace)[0] + ".json"
    windows = json.load(open(report)).get("windows_ns", {})
    if not windows:
        sys.exit(f"{report}: no windows_ns (loaders.py --record writes them)")
    calls = list(rows(trace))
    print(f"{trace}: {len(windows)} timed calls; bounds with the link at {link:.0f} GB/s")
    print(f"  {'call':18s} {'span':>7s} {'before':>7s} {'after':>6s} {'copies':>7s} {'host':>6s} "
          f"{'waits':>6s} {'nocopy':>7s} {'GB':>5s} {'b.free':>7s} {'b.link':>7s}   (ms)")
    for name, (w0, w1) in windows.items():
        r = window_report(calls, w0, w1, link)
        if r["calls"] == 0:
            print(f"  {name:18s} {r['span_ms']:7.1f}  no copy-related call inside")
            continue
        print(f"  {name:18s} {r['span_ms']:7.1f} {r['before_ms']:7.1f} {r['after_ms']:6.1f} "
              f"{r['copy calls ms']:7.1f} {r['host leg ms']:6.1f} {r['waits ms']:6.1f} "
              f"{r['no_copy_ms']:7.1f} {r['gpu_gb']:5.2f} {r['bound_free_ms']:7.1f} "
              f"{r['bound_link_ms']:7.1f}  ({r['threads']} thread(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
