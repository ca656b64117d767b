#!/usr/bin/env python3
"""An offloaded inference's recorded trace (cmt run --record, version 5 or 6; bench/workloads/offload.py)
cut into forward passes, and for each: its span, the time its thread spent inside copy calls, the
copies' time on their streams, and the rest, the thread's time between calls (lab/NOTES.md 82);
from version 6 on also the part of that spent inside synchronize calls, and the rest, the
program's own work (NOTES 83: accelerate's `.to()` is blocking, so PyTorch synchronizes the stream
after every copy, and between-call time holds a pinned pass's DMAs; version 5 could not say so).

How a pass's copy time shows depends on the copy: a copy from pinned memory returns at once and its
DMA runs while the thread goes on (Python launching the layer's kernels), so its time hides in the
time between calls, overlapped or waited for; a staged copy (cmt's or CUDA's own) holds the thread
until its source is staged, and a copy from a registration (cmt's hot buffers) until its DMA ends,
as a pageable source must be free to change once the call returns. `between - waits` subtracts,
for every copy, the part of its stream time past its call's end, as if the thread waited for each
copy right after its call: right for a staged copy, an overestimate of the wait (so an
underestimate of the thread's own work) for a pinned one whose DMA overlaps the next work.

Passes: a trace of offload.py's --same-process child holds each mode's passes in turn (labelled by
the large copies: from pinned memory -> pinned, else by outcome: taken or hot -> cmt, disabled (cmt
off or the thread forwarding) -> default); a trace of one mode's process is one run; within
a mode's run of calls, a pass starts at every other copy of the largest size (the embedding's, then
the head's). Reported per mode: each pass, and medians over all but the mode's first pass.

usage: offload_passes.py TRACE.tsv[.gz]"""
import gzip
import statistics
import sys

MODES = {"taken": "cmt", "hot": "cmt", "pinned_or_managed": "pinned", "disabled": "default"}


def load(path):
    """The trace's host-to-device calls, in order of their start."""
    f = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    rows = [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]
    head, rows = rows[0], rows[1:]
    if "gpu_ns" not in head:
        sys.exit(f"{path}: not a version 5 trace (no gpu_ns column)")
    ix = {h: i for i, h in enumerate(head)}
    calls = [dict(start=int(r[ix["start_ns"]]), end=int(r[ix["end_ns"]]), bytes=int(r[ix["bytes"]]),
                  outcome=r[ix["outcome"]], pinned=r[ix["host"]] == "pinned",
                  gpu=max(0, int(r[ix["gpu_ns"]])))
             for r in rows if r[ix["direction"]] == "h2d"]
    waits = sorted((int(r[ix["start_ns"]]), int(r[ix["end_ns"]]))
                   for r in rows if r[ix["direction"]] == "wait")
    return sorted(calls, key=lambda c: c["start"]), waits


def runs_by_mode(calls):
    """Runs of calls of one mode (small calls take the mode of the last large one before them)."""
    runs, mode = [], None
    for c in calls:
        if c["bytes"] >= 1 << 20 and (c["pinned"] or c["outcome"] in MODES):
            mode = "pinned" if c["pinned"] else MODES[c["outcome"]]
        if mode is None:
            continue
        if runs and runs[-1][0] == mode:
            runs[-1][1].append(c)
        else:
            runs.append((mode, [c]))
    return runs


def passes(run):
    """A run cut at every other copy of the run's largest size."""
    largest = max(c["bytes"] for c in run)
    starts = [i for i, c in enumerate(run) if c["bytes"] == largest][::2]
    if not starts or starts[0] != 0:
        starts = [0] + starts
    return [run[a:b] for a, b in zip(starts, starts[1:] + [len(run)])]


def measure(p, waits):
    span = max(c["end"] for c in p) - p[0]["start"]
    in_calls = sum(c["end"] - c["start"] for c in p)
    guessed = sum(max(0, c["start"] + c["gpu"] - c["end"]) for c in p)
    lo, hi = p[0]["start"], max(c["end"] for c in p)
    waited = sum(min(e, hi) - max(b, lo) for b, e in waits if b < hi and e > lo)
    return dict(span=span / 1e6, calls=in_calls / 1e6, stream=sum(c["gpu"] for c in p) / 1e6,
                between=(span - in_calls) / 1e6, less_waits=(span - in_calls - guessed) / 1e6,
                waited=waited / 1e6, own=(span - in_calls - waited) / 1e6, n=len(p))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    by_mode = {}
    calls, waits = load(sys.argv[1])
    for mode, run in runs_by_mode(calls):
        by_mode.setdefault(mode, []).extend(measure(p, waits) for p in passes(run) if len(p) > 1)
    keys = ("span", "calls", "stream", "between", "less_waits")
    title = "between calls less waits guessed from the streams"
    if waits:  # version 6: the waits themselves
        keys += ("waited", "own")
        title += ", in synchronize calls, the program's own work"
    for mode, ps in by_mode.items():
        print(f"{mode}: {len(ps)} passes (ms: span, in calls, copies on their streams, between calls, "
              f"{title}; copies)")
        for p in ps:
            print("  " + "  ".join(f"{p[k]:7.1f}" for k in keys) + f"  {p['n']}")
        if len(ps) > 1:
            print("  median of all but the first: " +
                  ", ".join(f"{k} {statistics.median(p[k] for p in ps[1:]):.1f}" for k in keys))


if __name__ == "__main__":
    main()
