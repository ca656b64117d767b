#!/usr/bin/env python3
"""Why the mapped loaders vary from process to process under cmt (lab/NOTES.md 95; issue 32).
loaders.py's torch.load(mmap=True) + .to('cuda') and safe_open + get_tensor().to('cuda') of the
same 2.2 GB (156 tensors) ran, one process each, at 7.4-25.6 GB/s under cmt in sessions 46 and 48
(default 4.7-8.7), the slow processes slow in both loaders and spending twice the CPU. Is it the
machine (the VM's memory bandwidth moving, as session 38 saw) or cmt (where its threads and the
caller run, the ring's pages, a lane)? Each process here runs ITERS times, in turn: both mapped
loaders (bytes checked the first time), a copy of the same 2.2 GB from pinned memory (the link),
torch's multi-threaded CPU copy of 512 MiB and numpy's one-thread copy of 256 MiB (the host's
memory bandwidth as it is at that moment), all timed on one clock, and for each load what the
scheduler says: how long the program's thread and cmt's ran and waited for a CPU, and how much
time the VM's host stole (/proc schedstat, /proc/stat); at its end each thread's CPU
time, the CPU it last ran on and its affinity, and the process's large anonymous mappings (cmt's
staging rings among them) with their huge pages. Modes alternate process by process: `default`
(CMT_DISABLE=1), `cmt`, and any NAME:VAR=VAL,... given; with --record DIR each process of a mode
other than default leaves its cmt trace (CMT_RECORD) and statistics (CMT_STATS) in DIR.

usage: mapped_states.py CMT [--rounds N] [--iters N] [--mode NAME:VAR=VAL,...]...
                        [--record DIR] [--json FILE] [--workdir DIR] [--deadline SECONDS]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "workloads"))
import loaders  # noqa: E402  (bench/workloads/loaders.py: the model's tensors and files)


PROBE_MT_BYTES = 512 << 20  # torch's multi-threaded CPU copy: the host's memory bandwidth
PROBE_1T_BYTES = 256 << 20  # numpy's one-thread copy: one core's


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def threads_now():
    """Each thread: name, CPU seconds, the CPU it last ran on, the CPUs it may run on."""
    tick, out = os.sysconf("SC_CLK_TCK"), []
    for tid in sorted(int(t) for t in os.listdir("/proc/self/task")):
        try:
            stat = open(f"/proc/self/task/{tid}/stat").read()
            allowed = sorted(os.sched_getaffinity(tid))
        except OSError:
            continue
        f = stat[stat.rindex(")") + 2:].split()
        cpus = (f"{allowed[0]}-{allowed[-1]}" if allowed == list(range(allowed[0], allowed[-1] + 1))
                else ",".join(map(str, allowed)))
        out.append([stat[stat.index("(") + 1:stat.rindex(")")], (int(f[11]) + int(f[12])) / tick,
                    int(f[36]), cpus])
    return out


def smaps():
    """Each mapping of the process, from /proc/self/smaps: (start, end, path ("" or a [name] where
    anonymous), {field: KiB}, VmFlags)."""
    out = []
    for line in open("/proc/self/smaps"):
        head = line.split()
        if "-" in head[0] and ":" not in head[0]:
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            out.append((lo, hi, head[5] if len(head) > 5 else "", {}, []))
        elif head[0] == "VmFlags:":
            out[-1][4].extend(head[1:])
        elif head[0].endswith(":") and len(head) > 1 and head[1].isdigit():
            out[-1][3][head[0][:-1]] = int(head[1])
    return out


def big_anon_mappings(least=16 << 20):
    """The process's anonymous mappings of `least` bytes or more: [start, MiB, AnonHugePages MiB,
    Rss MiB, whether madvised for huge pages] (cmt's staging rings are 24-48 MiB ones)."""
    return [[hex(lo), (hi - lo) >> 20, kib.get("AnonHugePages", 0) >> 10, kib.get("Rss", 0) >> 10,
             "hg" in flags] for lo, hi, path, kib, flags in smaps()
            if (not path or path.startswith("[anon")) and hi - lo >= least]


def sched_now():
    """What the scheduler says so far: {tid: [name, ns run, ns waited runnable for a CPU]}
    (/proc schedstat), and the machine's stolen time in ns (/proc/stat: a VM's vCPUs kept off the
    host's cores), to tell a thread kept from its CPU, or a VM held back, from slow code."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = open(f"/proc/self/task/{tid}/stat").read()
            run, wait = open(f"/proc/self/task/{tid}/schedstat").read().split()[:2]
        except OSError:
            continue
        out[int(tid)] = [stat[stat.index("(") + 1:stat.rindex(")")], int(run), int(wait)]
    steal = int(open("/proc/stat").readline().split()[8]) * (1e9 / os.sysconf("SC_CLK_TCK"))
    return out, steal


def sched_during(before, after):
    """Per loader: the main thread's ms run and ms waited for a CPU, the copy threads' (summed),
    and the machine's ms stolen, between two sched_now()s."""
    (b, steal0), (a, steal1) = before, after
    me = os.getpid()
    ms = lambda tids, k: sum(a[t][k] - b[t][k] for t in tids if t in b) / 1e6  # noqa: E731
    copy = [t for t in a if a[t][0] == "cmt-copy"]
    return {"main_run_ms": ms([me], 1), "main_wait_ms": ms([me], 2),
            "copy_run_ms": ms(copy, 1), "copy_wait_ms": ms(copy, 2),
            "steal_ms": (steal1 - steal0) / 1e6}


def file_mappings(*paths):
    """The process's mappings of these files: [name, start % 2 MiB in KiB, MiB, Rss MiB,
    FilePmdMapped MiB] (a mapping's pages may come in 2 MiB at a time where the page cache holds
    large folios and the mapping is aligned to them)."""
    return [[os.path.basename(path), (lo % (2 << 20)) >> 10, (hi - lo) >> 20,
             kib.get("Rss", 0) >> 10, kib.get("FilePmdMapped", 0) >> 10]
            for lo, hi, path, kib, flags in smaps() if path in paths]


def child(pt, st, blob, index_path, iters):
    import numpy as np
    import torch
    from safetensors import safe_open
    torch.zeros(1, device="cuda")
    index = json.load(open(index_path))
    names = [n for n, _, _ in index]
    resident = {n: torch.from_numpy(np.fromfile(blob, dtype=np.uint8, count=c, offset=a))
                for n, a, c in index}
    gb = sum(t.numel() for t in resident.values()) / 1e9
    pinned = torch.empty(int(gb * 1e9), dtype=torch.uint8).pin_memory()
    pinned.copy_(torch.from_numpy(np.fromfile(blob, dtype=np.uint8, count=pinned.numel())))
    on_gpu = torch.empty_like(pinned, device="cuda")
    src = torch.ones(PROBE_MT_BYTES, dtype=torch.uint8)
    dst = torch.empty(PROBE_MT_BYTES, dtype=torch.uint8)
    a1, b1 = np.ones(PROBE_1T_BYTES, dtype=np.uint8), np.empty(PROBE_1T_BYTES, dtype=np.uint8)

    files = (os.path.realpath(pt), os.path.realpath(st))
    seen = {}  # each load's end, and its file mappings read while still mapped (after the end)

    def loaded(name):
        torch.cuda.synchronize()
        seen[name] = (time.perf_counter(), sched_now())
        seen[name + "_maps"] = file_mappings(*files)

    def mmap_load():
        sd = torch.load(pt, mmap=True, weights_only=True)
        out = {k: v.to("cuda") for k, v in sd.items()}
        loaded("mmap")
        return out

    def safe_load():
        with safe_open(st, framework="pt", device="cpu") as f:
            out = {k: f.get_tensor(k).to("cuda") for k in names}
            loaded("safe")
        return out

    def from_pinned():
        on_gpu.copy_(pinned, non_blocking=True)
        torch.cuda.synchronize()
    rows, ok = [], True
    for i in range(iters):
        row = {"at_ns": time.monotonic_ns()}
        for name, fn in (("mmap", mmap_load), ("safe", safe_load)):
            w0, sched0 = time.monotonic_ns(), sched_now()
            t0 = time.perf_counter()
            out = fn()
            end, sched1 = seen.pop(name)
            row[name] = gb / (end - t0)
            row[name + "_sched"] = sched_during(sched0, sched1)
            row[name + "_maps"] = seen.pop(name + "_maps")
            row[name + "_window_ns"] = [w0, w0 + int((end - t0) * 1e9)]
            if i == 0:
                ok &= all(torch.equal(out[k].cpu(), resident[k]) for k in names)
            del out
        row["pinned"] = gb / timed(from_pinned)[1]
        row["cpu_mt"] = 2 * dst.numel() / 1e9 / timed(lambda: dst.copy_(src))[1]  # read + write
        row["cpu_1t"] = 2 * b1.size / 1e9 / timed(lambda: np.copyto(b1, a1))[1]
        rows.append(row)
    print(json.dumps({"rows": rows, "threads": threads_now(), "mappings": big_anon_mappings(),
                      "check": "ok" if ok else "WRONG BYTES", "pid": os.getpid()}))


def parse_args():
    p = argparse.ArgumentParser(prog="mapped_states.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmt", nargs="?")
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--mode", action="append", default=[], metavar="NAME:VAR=VAL,...")
    p.add_argument("--record", metavar="DIR")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--workdir", default="/tmp/cmt-mapped-states")
    p.add_argument("--deadline", type=float, default=1e9)
    a = p.parse_args()
    if not a.child and not a.cmt:
        p.error("CMT, the cmt launcher, is required")
    return a


def line(m, doc):
    r = doc["rows"]
    f = lambda k: "/".join(f"{x[k]:.1f}" for x in r)  # noqa: E731
    py = [t for t in doc["threads"] if t[0].startswith("python")][:1]
    copy = [t for t in doc["threads"] if t[0] == "cmt-copy"]
    rings = [f"{mp[1]}M:{mp[2]}h{'+hg' if mp[4] else ''}" for mp in doc["mappings"]
             if mp[1] <= 64]
    maps = {k: [mp[1:] for mp in r[0].get(k + "_maps", [])] for k in ("mmap", "safe")}
    return (f"{m:8s} pid {doc['pid']}: mmap {f('mmap')} safe {f('safe')} pinned {f('pinned')} "
            f"cpu-mt {f('cpu_mt')} cpu-1t {f('cpu_1t')} GB/s; python cpu {py[0][1] if py else '-'}"
            f" s on cpu {py[0][2] if py else '-'}; {len(copy)} copy threads "
            f"{sum(t[1] for t in copy):.2f} s; anon maps <=64M {rings}; file maps (start % 2M "
            f"KiB, MiB, rss, pmd) {maps}; scheduler per mmap load (main run/wait, copy threads "
            f"run/wait, stolen; ms) {[sched(x.get('mmap_sched')) for x in r]}; {doc['check']}")


def sched(d):
    return "-" if not d else (f"{d['main_run_ms']:.0f}/{d['main_wait_ms']:.1f} "
                              f"{d['copy_run_ms']:.0f}/{d['copy_wait_ms']:.1f} {d['steal_ms']:.0f}")


def main():
    a = parse_args()
    if a.child:
        return child(*a.child[:4], int(a.child[4]))
    modes = {"default": {"CMT_DISABLE": "1"}, "cmt": {}}
    for spec in a.mode:
        name, _, kv = spec.partition(":")
        modes[name] = dict(x.split("=", 1) for x in kv.split(",") if x)
    os.makedirs(a.workdir, exist_ok=True)
    blob = os.path.join(a.workdir, "model.bin")
    index = loaders.write_blob(blob)
    json.dump(index, open(blob + ".json", "w"))
    pt, st = loaders.prepare_files(a.workdir, blob, index)
    if a.record:
        os.makedirs(a.record, exist_ok=True)
    names, docs = list(modes), {m: [] for m in modes}
    t0, longest = time.monotonic(), 0.0
    for r in range(a.rounds):
        if r and time.monotonic() - t0 + longest > a.deadline:
            print(f"--deadline {a.deadline:.0f} s: stopping after {r} rounds", file=sys.stderr)
            break
        r0 = time.monotonic()
        for m in names[r % len(names):] + names[:r % len(names)]:
            env = dict(os.environ, **modes[m])
            if a.record and m != "default":
                env["CMT_RECORD"] = os.path.join(a.record, f"{m}-r{r}-%p.tsv")
                env["CMT_STATS"] = os.path.join(a.record, f"{m}-r{r}-%p.stats.json")
            p = subprocess.run([a.cmt, "run", "--", sys.executable, os.path.abspath(__file__),
                                "--child", pt, st, blob, blob + ".json", str(a.iters)],
                               env=env, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{m} round {r}: rc {p.returncode}: {p.stderr[-500:]}", flush=True)
                continue
            doc = json.loads(p.stdout.strip().splitlines()[-1])
            doc["round"] = r
            docs[m].append(doc)
            print(line(m, doc), flush=True)
        longest = max(longest, time.monotonic() - r0)
    for m in names:
        v = [x for d in docs[m] for x in d["rows"]]
        if v:
            print(f"{m}: medians of {len(v)} iterations: " + ", ".join(
                f"{k} {statistics.median(x[k] for x in v):.1f} [{min(x[k] for x in v):.1f}-"
                f"{max(x[k] for x in v):.1f}]" for k in ("mmap", "safe", "pinned", "cpu_mt",
                                                         "cpu_1t")))
    checks = sorted({d["check"] for v in docs.values() for d in v})
    print(f"checks {checks}")
    if a.json:
        json.dump({"command": sys.argv, "modes": modes, "docs": docs, "checks": checks,
                   "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, open(a.json, "w"), indent=1)
    return 0 if checks == ["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
