#!/usr/bin/env python3
"""A staging loader's passes, one after another in one process (issue 32, lab/NOTES.md 84): a file
in the page cache read into one pinned buffer CHUNK bytes at a time (read(2) with readinto, or C's
fread), each buffer copied to its place in one GPU tensor, as bench/workloads/loaders.py's
read-pinned and fread-pinned scenarios do once a process. Why: those scenarios, under cmt, ran
either at ~21 GB/s or at ~9 GB/s (the default path's rate) from one process to the next, in every
thread count tried (NOTES 84); a pass-by-pass run says whether the slow state belongs to a
process or comes and goes, and what comes before it (--between check: the whole tensor copied back
to new host memory and compared, as loaders.py checks each scenario; none: nothing). Each pass is
loaders.read_through_pinned itself, its GPU tensor and pinned buffer kept from pass to pass, or with
--fresh made anew after the last pass's were freed and torch.cuda.empty_cache(), as loaders.py
runs the scenario; --after-1m: each pass after a pass of 1 MiB reads and its check, as loaders.py
runs the 1 MiB scenario first.

Prints one line a pass (GB/s, the time in the reads, the rest) and a JSON summary on the last line.
usage: read_loop.py FILE [--chunk MIB] [--passes N] [--fread] [--between check|none] [--fresh]
                    [--after-1m]"""
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "workloads"))
import loaders  # noqa: E402  (bench/workloads/loaders.py)


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    path = sys.argv[1]
    chunk = int(arg("--chunk", "16")) << 20
    passes = int(arg("--passes", "12"))
    use_fread = "--fread" in sys.argv
    between = arg("--between", "check")
    size = os.path.getsize(path)
    torch.zeros(1, device="cuda")
    with open(path, "rb") as f:
        whole = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    out = torch.empty(size, dtype=torch.uint8, device="cuda")
    pinned = torch.empty(chunk, dtype=torch.uint8).pin_memory()
    rows, ok = [], True
    for p in range(passes):
        if "--after-1m" in sys.argv:
            small = loaders.read_through_pinned(torch, path, 1 << 20, use_fread)
            ok &= torch.equal(small.cpu(), whole)
            del small
            torch.cuda.empty_cache()
        reads = []
        if "--fresh" in sys.argv:  # as loaders.py's scenario: a new tensor and buffer each pass
            del out
            torch.cuda.empty_cache()
            t0 = time.perf_counter()
            out = loaders.read_through_pinned(torch, path, chunk, use_fread, read_seconds=reads)
        else:
            t0 = time.perf_counter()
            loaders.read_through_pinned(torch, path, chunk, use_fread, out=out, pinned=pinned,
                                        read_seconds=reads)
        read_s = sum(reads)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        rows.append({"pass": p, "gbps": size / seconds / 1e9, "seconds": seconds,
                     "read_s": read_s, "rest_s": seconds - read_s})
        print(f"pass {p}: {size / seconds / 1e9:5.1f} GB/s, {seconds * 1e3:6.1f} ms: reads "
              f"{read_s * 1e3:6.1f} ms, the rest {(seconds - read_s) * 1e3:6.1f} ms", flush=True)
        if between == "check" or p == 0:
            ok &= torch.equal(out.cpu(), whole)
        out.zero_()
    g = [r["gbps"] for r in rows]
    print(json.dumps({"chunk": chunk, "fread": use_fread, "between": between, "passes": rows,
                      "median_gbps": statistics.median(g), "min_gbps": min(g), "max_gbps": max(g),
                      "check": "ok" if ok else "WRONG BYTES"}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
