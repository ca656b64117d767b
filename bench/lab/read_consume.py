#!/usr/bin/env python3
"""What cmt's file reads into ordinary memory cost the CPU code that reads the buffer next (lab/
NOTES.md 93). Session 46 (5611af6) sent every read of 512 KiB or more that cmt takes through a slot
per copy thread, streamed into the program's buffer with non-temporal stores (host_reads = all
takes reads into any memory once CUDA is up): the bytes end in memory, not in a cache. Session 47
kept that for reads into CUDA host memory and reads of 8 MiB or more, and reads smaller ones into
ordinary memory straight into the buffer again (the threads' caches keep their lines), unmeasured.
The default path's one-thread read leaves the last of the bytes in its core's caches, and a program
that parses what it read (a data loader, a tokenizer, a checksum) then reads them from there.

A file of FILE_MIB in the page cache is read CHUNK at a time, each chunk consumed before the next
read: `readinto` into one buffer kept from chunk to chunk, or `read` (a new bytes object a chunk, as
f.read(n) makes). Consumers: `sum` (numpy's sum of the chunk as uint64: as fast as memory gives it
bytes) and `crc` (zlib.crc32: slower, touches every byte). Each mode is a process under `cmt run`,
CUDA started first (torch), modes alternating round by round: `default` (CMT_DISABLE=1), `cmt`, and
any NAME:VAR=VAL,... given. Reported: the time in the reads, in the consumer, and the whole, per GB
(medians of the passes, then of the rounds), and the CPU seconds of the process; every pass's sum
and CRC are checked against the parent's, computed without cmt.

usage: read_consume.py CMT [--rounds N] [--passes N] [--file-mib N] [--chunks 1,4,16,64]
                       [--mode NAME:VAR=VAL,...]... [--json FILE] [--workdir DIR]
                       [--deadline SECONDS: no round started that would end past it]"""
import json
import os
import statistics
import subprocess
import sys
import time
import zlib

import numpy as np


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def uint64_sum(chunk):
    """The chunk's sum as uint64 words, mod 2^64 (numpy: as fast as memory gives it bytes)."""
    return int(np.frombuffer(chunk, dtype=np.uint64).sum(dtype=np.uint64))


def one_pass(path, chunk_bytes, how, kind):
    """One pass over the file; (read seconds, consume seconds, the pass's sum mod 2^64 or CRC)."""
    read_s = use_s = 0.0
    acc = 0
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(chunk_bytes) if how == "readinto" else None
        view = memoryview(buf) if buf is not None else None
        while True:
            t0 = time.perf_counter()
            if how == "readinto":
                got = f.readinto(view)
                data = view[:got]
            else:
                data = f.read(chunk_bytes)
                got = len(data)
            t1 = time.perf_counter()
            if not got:
                break
            if kind == "sum":
                acc = (acc + uint64_sum(data)) & (2**64 - 1)
            else:
                acc = zlib.crc32(data, acc)
            read_s += t1 - t0
            use_s += time.perf_counter() - t1
            del data
    return read_s, use_s, acc


def child():
    try:
        import torch
        torch.zeros(1, device="cuda")  # cmt takes reads into ordinary memory from the first CUDA call
    except ImportError:  # a machine without torch: the reads stay libc's (a dry run of the script)
        pass
    path, passes = sys.argv[2], int(sys.argv[3])
    chunks = [int(c) for c in sys.argv[4].split(",")]
    gb = os.path.getsize(path) / 1e9
    out = {"rows": {}, "acc": {}}
    for mib in chunks:
        for how in ("readinto", "read"):
            for kind in ("sum", "crc"):
                name = f"{how}-{mib}M-{kind}"
                r0 = os.times()
                runs = [one_pass(path, mib << 20, how, kind) for _ in range(passes)]
                r1 = os.times()
                cpu = (r1.user - r0.user + r1.system - r0.system) / (gb * passes)
                med = lambda v: statistics.median(v) / gb  # noqa: E731  (s per GB)
                out["rows"][name] = {"read_s_gb": med([r[0] for r in runs]),
                                     "use_s_gb": med([r[1] for r in runs]),
                                     "all_s_gb": med([r[0] + r[1] for r in runs]),
                                     "cpu_s_gb": cpu}
                out["acc"][name] = sorted({r[2] for r in runs})
    print(json.dumps(out))


def expected(path):
    total, crc = 0, 0
    with open(path, "rb") as f:
        while True:
            b = f.read(64 << 20)
            if not b:
                break
            total = (total + uint64_sum(b)) & (2**64 - 1)
            crc = zlib.crc32(b, crc)
    return {"sum": total, "crc": crc}


def main():
    if sys.argv[1] == "--child":
        return child()
    cmt = sys.argv[1]
    rounds, passes = int(arg("--rounds", "3")), arg("--passes", "3")
    chunks = arg("--chunks", "1,4,16,64")
    workdir = arg("--workdir", "/tmp/cmt-read-consume")
    modes = {"default": {"CMT_DISABLE": "1"}, "cmt": {}}
    for k, a in enumerate(sys.argv):
        if a == "--mode":
            name, _, spec = sys.argv[k + 1].partition(":")
            modes[name] = dict(kv.split("=", 1) for kv in spec.split(",") if kv)
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "blob")
    size = int(arg("--file-mib", "512")) << 20
    if not os.path.exists(path) or os.path.getsize(path) != size:
        with open(path, "wb") as f:
            f.write(np.random.default_rng(47).integers(0, 256, size, dtype=np.uint8).tobytes())
    want = expected(path)  # also puts the file in the page cache
    names = list(modes)
    runs = {m: [] for m in names}
    wrong = []
    deadline, t0, longest = float(arg("--deadline", "1e9")), time.monotonic(), 0.0
    for r in range(rounds):
        if time.monotonic() - t0 + longest > deadline:
            print(f"--deadline {deadline:.0f} s: stopping after {r} rounds", file=sys.stderr)
            break
        r0 = time.monotonic()
        for m in names[r % len(names):] + names[:r % len(names)]:
            env = dict(os.environ, **modes[m])
            p = subprocess.run([cmt, "run", "--", sys.executable, os.path.abspath(__file__),
                                "--child", path, passes, chunks], env=env, capture_output=True,
                               text=True)
            if p.returncode != 0:
                print(f"{m} round {r}: rc {p.returncode}: {p.stderr[-400:]}", file=sys.stderr)
                continue
            doc = json.loads(p.stdout.strip().splitlines()[-1])
            for name, acc in doc["acc"].items():
                if acc != [want[name.rsplit("-", 1)[1]]]:
                    wrong.append(f"{m} round {r} {name}: {acc}")
            runs[m].append(doc["rows"])
            print(f"round {r} {m} done", file=sys.stderr, flush=True)
        longest = max(longest, time.monotonic() - r0)
    report(runs, names, wrong)
    if "--json" in sys.argv:
        with open(arg("--json", ""), "w") as f:
            json.dump({"command": sys.argv, "modes": modes, "runs": runs, "wrong": wrong,
                       "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f, indent=1)


def report(runs, names, wrong):
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}: ms per GB, median of rounds [spread], whole "
          f"(read + consume) against default; checks: {'ok' if not wrong else wrong}")
    rows = list(runs[names[0]][0]) if runs[names[0]] else []
    print(f"{'scenario':22s} " + " ".join(f"{m + ' read/use/all':>30s}" for m in names))
    for row in rows:
        cells, base = [], None
        for m in names:
            vals = [r[row] for r in runs[m] if row in r]
            if not vals:
                cells.append(f"{'-':>30s}")
                continue
            med = {k: statistics.median(v[k] for v in vals) * 1e3 for k in vals[0]}
            spread = (max(v["all_s_gb"] for v in vals) - min(v["all_s_gb"] for v in vals)) * 1e3
            base = med["all_s_gb"] if base is None else base
            cells.append(f"{med['read_s_gb']:6.0f}/{med['use_s_gb']:4.0f}/{med['all_s_gb']:4.0f}"
                         f" [{spread / med['all_s_gb']:4.0%}] {med['all_s_gb'] / base:4.2f}x")
        print(f"{row:22s} " + " ".join(cells))
    print("CPU s/GB: " + "; ".join(
        f"{m} " + statistics.median(statistics.median(r[row]["cpu_s_gb"] for row in r)
                                    for r in runs[m]).__format__(".2f") for m in names if runs[m]))


if __name__ == "__main__":
    main()
