#!/usr/bin/env python3
"""A recorded trace (cmt run --record, version 3) cut into bursts of host-to-device copies of
1 MiB and up, split wherever no copy ran for GAP ms (each scenario of bench/workloads/loaders.py
is one burst), and for each: threads, bytes over the burst's span, each lane's share of the span
spent holding a copy, the copies' own rate (bytes over their time on a lane), the first DMA's delay
and the longest wait for a lane (lab/NOTES.md 46), and its window in seconds from the trace's
first call, as `cmt bench replay --window` takes it.

usage: trace_windows.py TRACE.tsv [GAP_MS]   (default 20)"""
import statistics
import sys


def first_start(path):
    """The trace's first call's start, where `cmt bench replay --window` counts from."""
    return min((int(line.split("\t", 1)[0]) for line in open(path)
                if not line.startswith("#") and not line.startswith("start_ns")), default=0)


def calls(path):
    for line in open(path):
        if line.startswith("#") or line.startswith("start_ns"):
            continue
        f = line.rstrip("\n").split("\t")
        if len(f) < 15:
            sys.exit(f"{path}: not a version 3 trace (no lane_wait_ns column)")
        yield dict(start=int(f[0]), end=int(f[1]), tid=int(f[2]), direction=f[4],
                   bytes=int(f[5]), lane=int(f[11]), first_dma=int(f[13]), wait=int(f[14]))


def bursts(copies, gap_ns):
    out = []
    for c in sorted(copies, key=lambda c: c["start"]):
        if out and c["start"] - max(x["end"] for x in out[-1]) <= gap_ns:
            out[-1].append(c)
        else:
            out.append([c])
    return out


def main():
    gap_ns = float(sys.argv[2] if len(sys.argv) > 2 else 20) * 1e6
    copies = [c for c in calls(sys.argv[1])
              if c["direction"] == "h2d" and c["lane"] >= 0 and c["bytes"] >= 1 << 20]
    origin = first_start(sys.argv[1])
    for b in bursts(copies, gap_ns):
        begin = min(c["start"] for c in b)
        span = max(c["end"] for c in b) - begin
        total = sum(c["bytes"] for c in b)
        held = {}
        for c in b:  # a lane is held from the end of the copy's wait to the call's return
            held[c["lane"]] = held.get(c["lane"], 0) + c["end"] - c["start"] - max(c["wait"], 0)
        lanes = " ".join(f"lane{k} {v / span * 100:.0f}%" for k, v in sorted(held.items()))
        rate = total / sum(held.values())
        first = sorted(c["first_dma"] for c in b)
        print(f"{len({c['tid'] for c in b})} threads, {len(b)} copies, {total / 2**20:.0f} MiB in "
              f"{span / 1e6:.1f} ms: {total / span:.1f} GB/s | held: {lanes} | on a lane "
              f"{rate:.1f} GB/s | first DMA median {statistics.median(first) / 1e3:.0f} us, 90th "
              f"{first[len(first) * 9 // 10] / 1e3:.0f} us | longest lane wait "
              f"{max(c['wait'] for c in b) / 1e6:.1f} ms | window "
              f"{(begin - origin) / 1e9:.4f}:{(begin + span - origin) / 1e9 + 1e-4:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
