#!/usr/bin/env python3
"""loaders.py's resident-T and mapped-T scenarios, many passes in one process, the thread counts
taking turns (issue 32, lab/NOTES.md 85). Why: at HEAD on the H100 (session 41, call 4) four
Python threads copying the model's tensors through cmt ran at 0.93-0.95 of one thread copying
them back to back (resident 29.5 against 31.0 GB/s, mapped 27.5 against 28.9), where the issue
wants none below it, and eight at 39.0. One pass per thread count in turn, so that the machine's
drift falls on every count alike; each pass is loaders.copy_all itself (`.to('cuda')` then the
stream's synchronize, each thread on its own stream, tensors taken in turn).

  --blocking-sync  the primary context's flags set to CU_CTX_SCHED_BLOCKING_SYNC through the
                   driver before CUDA starts: the threads waiting in a synchronize sleep instead
                   of spinning on a core (do the waiters of four threads take cores from cmt's
                   copy threads?)
  --mapped         each pass from a fresh np.memmap of the file (loaders.py's mapped-T)
  --pinned         from pinned copies of the tensors (the ceiling)

Prints a line a pass and a JSON summary (median GB/s per thread count) on the last line.
usage: thread_copies.py BLOB [--threads 1,4,8] [--passes N] [--blocking-sync] [--mapped] [--pinned]
       (BLOB: loaders.py's model.bin, with BLOB.json its index)"""
import ctypes
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "workloads"))
import loaders  # noqa: E402  (bench/workloads/loaders.py)


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    blob = sys.argv[1]
    index = json.load(open(blob + ".json"))
    counts = [int(t) for t in arg("--threads", "1,4,8").split(",")]
    passes = int(arg("--passes", "6"))
    if "--blocking-sync" in sys.argv:
        # The primary context's flags, set through the driver before anything makes the context.
        cuda = ctypes.CDLL("libcuda.so.1")
        dev = ctypes.c_int()
        rc = [cuda.cuInit(0), cuda.cuDeviceGet(ctypes.byref(dev), 0)]
        setter = (getattr(cuda, "cuDevicePrimaryCtxSetFlags_v2", None)
                  or cuda.cuDevicePrimaryCtxSetFlags)
        rc.append(setter(dev, 4))  # CU_CTX_SCHED_BLOCKING_SYNC
        print(f"primary context BLOCKING_SYNC: {rc}", flush=True)
    import numpy as np
    import torch
    torch.zeros(1, device="cuda")
    resident = [torch.from_numpy(np.fromfile(blob, dtype=np.uint8, count=n, offset=a))
                for _, a, n in index]
    if "--pinned" in sys.argv:
        resident = [s.pin_memory() for s in resident]

    def sources():
        if "--mapped" not in sys.argv:
            return resident
        m = np.memmap(blob, dtype=np.uint8, mode="r")
        return [torch.from_numpy(m[a:a + n]) for _, a, n in index]

    rates, ok = {t: [] for t in counts}, True
    for p in range(passes):
        for t in counts:
            gbps, cpu, copies = loaders.copy_all(torch, sources(), t)
            if p == 0:
                ok &= loaders.checked(torch, resident, copies)
            del copies
            rates[t].append(gbps)
            print(f"pass {p} threads {t}: {gbps:5.1f} GB/s, cpu {cpu:.2f} s/GB", flush=True)
    print(json.dumps({"median_gbps": {t: statistics.median(r[1:]) for t, r in rates.items()},
                      "gbps": rates, "check": "ok" if ok else "WRONG BYTES"}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
