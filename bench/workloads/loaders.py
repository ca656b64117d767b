#!/usr/bin/env python3
"""Model loads as real loaders make them (issue 32): the tensors of a 1.1B Llama (TinyLlama's
shapes, bf16, 2.2 GB, 4-125 MiB each, random bytes) copied to the GPU with `.to('cuda')`,
every byte checked afterwards, in these scenarios:

  mapped-T    T Python threads (1, 4, 8) at once, each on its own CUDA stream, taking tensors in
              turn from a fresh np.memmap of the safetensors-like file (its file in the page cache,
              the mapping new: the pages fault in as they are read), as transformers' loader does
  resident-T  the same from tensors in ordinary memory the process has read already
  gap-1ms     one thread, resident tensors, 1 ms of CPU work (a busy loop) after each copy
  pinned-T    resident-T from pinned copies of the tensors (the ceiling; in the default process),
              and pinned-gap-1ms, gap-1ms's
  hf          transformers' `from_pretrained(dir, device_map='cuda', dtype=bfloat16)` of the same
              model saved with save_pretrained (safetensors), the whole call, CUDA started
              beforehand (with --hf): the process's second call timed (its first, which also
              imports the model's modules, is reported beside it)

  files       (with --files) checkpoint loaders reading the same tensors from files in the page
              cache: torch.load(map_location='cuda') of a torch.save'd dict (torch-load-cuda),
              torch.load(mmap=True) then .to('cuda') of each (torch-load-mmap), safetensors'
              safe_open + get_tensor(name).to('cuda') of each (safe-open), load_file(device=
              'cuda') (load-file), and a staging loader: the safetensors file read with
              readinto (read(2)) into one pinned buffer of 1 MiB (read-pinned-1M) or 16 MiB
              (read-pinned-16M) at a time, or with C's fread (fread-pinned-1M, -16M), or
              os.preadv of 16 MiB in two segments (preadv-pinned-16M), each buffer then copied
              into one GPU tensor

Each process is one mode and runs every scenario `--reps` times (3 by default; its figure the
median, its first repetition's bytes checked; a mapped scenario maps the file afresh each time;
the file loaders once each): `default` (cmt run with CMT_DISABLE=1,
the same launcher), `cmt` (built-in defaults) and any `--mode NAME:VAR=VALUE,...` given (cmt with
those variables, e.g. lanes1:CMT_LANES=1); each round starts one mode further on. Reported: GB/s of each
scenario (all bytes over the wall time from the first copy's start to the last thread's end),
median of the rounds, their spread (and the lowest, `low`, where a process ran below 3/4 of the
median), each mode against default and against pinned, and the CPU
seconds the process spent per GB copied (cmt's copy threads included: speed must not be bought
with spinning that `top` shows). With
--record DIR, one more round of each cmt mode runs under `cmt run --record` and leaves its trace
in DIR, and beside it (NAME.json) the child's report with each timed call's start and end on the
trace's clock (CLOCK_MONOTONIC ns), which bench/lab/load_bounds.py reads. A mode other than
`default` with CMT_DISABLE=1 (e.g. --mode off:CMT_DISABLE=1) records the default path's trace.

usage: loaders.py CMT [--rounds N] [--reps N] [--mode NAME:VAR=VAL,...]... [--hf | --hf-only]
                  [--files | --files-only]
                  [--record DIR] [--json FILE] [--workdir DIR] [--deadline SECONDS]

--deadline S starts no further round once the longest round so far would end past S seconds,
and reports the rounds done (a device call's limit then cuts rounds, not the report).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import machine_meta  # noqa: E402  (bench/machine_meta.py)
from script_args import add_mode_option, modes_from  # noqa: E402  (bench/script_args.py)

HIDDEN, INTER, VOCAB, LAYERS, KV = 2048, 5632, 32000, 22, 256
THREADS = (1, 4, 8)
# Each scenario's repetitions in one process: a single pass of 2.2 GB takes 0.05-0.3 s, and single
# passes of one mode differed by 10-20% between processes (lab/NOTES.md 48).
REPS = 3  # --reps


def shapes():
    """TinyLlama-1.1B's weight shapes, largest first as a loader meets them in the file."""
    out = [("model.embed_tokens.weight", (VOCAB, HIDDEN))]
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        out += [(p + "self_attn.q_proj.weight", (HIDDEN, HIDDEN)),
                (p + "self_attn.k_proj.weight", (KV, HIDDEN)),
                (p + "self_attn.v_proj.weight", (KV, HIDDEN)),
                (p + "self_attn.o_proj.weight", (HIDDEN, HIDDEN)),
                (p + "mlp.gate_proj.weight", (INTER, HIDDEN)),
                (p + "mlp.up_proj.weight", (INTER, HIDDEN)),
                (p + "mlp.down_proj.weight", (HIDDEN, INTER))]
    out.append(("lm_head.weight", (VOCAB, HIDDEN)))
    return out


def write_blob(path):
    """The tensors' bytes back to back (random, so a wrong byte shows), and their offsets."""
    import numpy as np
    rng = np.random.default_rng(7)
    index, at = [], 0
    with open(path, "wb") as f:
        for name, shape in shapes():
            n = shape[0] * shape[1] * 2
            f.write(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
            index.append((name, at, n))
            at += n
    return index


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def copy_all(torch, sources, threads, gap_s=0.0):
    """`threads` threads take the tensors in turn and copy each with .to('cuda') on their own
    stream; the GB/s of all bytes over the wall time, the CPU seconds per GB, and the copies."""
    out = [None] * len(sources)
    next_i = [0]
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)

    def worker():
        stream = torch.cuda.Stream()
        start.wait()
        with torch.cuda.stream(stream):
            while True:
                with lock:
                    i = next_i[0]
                    next_i[0] += 1
                if i >= len(sources):
                    break
                out[i] = sources[i].to("cuda", non_blocking=False)
                stream.synchronize()
                if gap_s:
                    busy(gap_s)
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    start.wait()
    t0, cpu0 = time.perf_counter(), time.process_time()
    for t in ts:
        t.join()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    # The whole process's CPU time (cmt's copy threads included), per GB: what speed cost in top.
    gb = sum(s.numel() for s in sources) / 1e9
    return gb / seconds, (time.process_time() - cpu0) / gb, out


def checked(torch, sources, copies):
    return all(torch.equal(c.cpu(), s) for c, s in zip(copies, sources))


def child_copies(blob, index):
    import numpy as np
    import torch
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    results, cpu, reps, ok = {}, {}, {}, [True]

    def scenario(name, sources_of, threads, gap_s=0.0):
        """One scenario timed REPS times, each on sources_of()'s tensors, the medians kept; the
        first repetition's bytes checked; every repetition's copies freed before the next."""
        rates, cpus = [], []
        for rep in range(REPS):
            rate, cpu_s, copies = copy_all(torch, sources_of(), threads, gap_s)
            rates.append(rate)
            cpus.append(cpu_s)
            if rep == 0:
                ok[0] &= checked(torch, resident, copies)
            del copies
        results[name], cpu[name] = statistics.median(rates), statistics.median(cpus)
        reps[name] = rates

    def mapped():
        m = np.memmap(blob, dtype=np.uint8, mode="r")  # a new mapping: nothing faulted in yet
        return [torch.from_numpy(m[a:a + n]) for _, a, n in index]

    resident = [torch.from_numpy(np.fromfile(blob, dtype=np.uint8, count=n, offset=a))
                for _, a, n in index]
    for t in THREADS:
        scenario(f"mapped-{t}", mapped, t)
        scenario(f"resident-{t}", lambda: resident, t)
    scenario("gap-1ms", lambda: resident, 1, gap_s=0.001)
    if os.environ.get("CMT_DISABLE") == "1":  # the ceiling, measured once per default process
        pinned = [s.pin_memory() for s in resident]
        for t in THREADS:
            scenario(f"pinned-{t}", lambda: pinned, t)
        scenario("pinned-gap-1ms", lambda: pinned, 1, gap_s=0.001)
    return {"gbps": results, "cpu_s_per_gb": cpu, "reps_gbps": reps,
            "check": "ok" if ok[0] else "WRONG BYTES"}


def child_hf(model_dir):
    import torch
    import transformers
    # transformers 5 names it dtype, 4 torch_dtype.
    major = int(transformers.__version__.split(".")[0])
    kw = {"dtype" if major >= 5 else "torch_dtype": torch.bfloat16}
    torch.zeros(1, device="cuda")  # CUDA's start is not the load's

    windows = {}  # each call's start and end on the clock a recorded trace keeps (NOTES 84)

    def load(name):
        t0, w0 = time.perf_counter(), time.monotonic_ns()
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, device_map="cuda",
                                                                  **kw)
        torch.cuda.synchronize()
        windows[name] = [w0, time.monotonic_ns()]
        return model, time.perf_counter() - t0
    # The process's first call also imports the model's modules and starts what they start; a
    # program that loads models (a server, a training job's checkpoints) pays that once. Both
    # are kept: the first call, and the second one, which is the load itself.
    model, first_seconds = load("hf-first")
    del model
    torch.cuda.empty_cache()
    model, seconds = load("hf")
    # Checked against the file: every tensor's bytes as safetensors holds them.
    from safetensors.torch import load_file
    ok = True
    for name, t in load_file(os.path.join(model_dir, "model.safetensors")).items():
        ok &= torch.equal(model.state_dict()[name].cpu(), t)
    return {"seconds": seconds, "first_seconds": first_seconds, "windows_ns": windows,
            "check": "ok" if ok else "WRONG BYTES"}


FILE_SCENARIOS = ("torch-load-cuda", "torch-load-mmap", "safe-open", "load-file",
                  "read-pinned-1M", "read-pinned-16M", "fread-pinned-1M", "fread-pinned-16M",
                  "preadv-pinned-16M")


def process_libc():
    """The process's C library through ctypes, fopen, fread and fclose typed: C's fread as a C
    program's call finds it (cmt's first)."""
    import ctypes
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fread.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    libc.fread.restype = ctypes.c_size_t
    libc.fclose.argtypes = [ctypes.c_void_p]
    return libc


def read_through_pinned(torch, path, chunk, use_fread=False, use_preadv=False, out=None,
                        pinned=None, read_seconds=None, copy_seconds=None):
    """A loader's staging: the file read into a pinned buffer `chunk` bytes at a time (raw
    readinto: one read(2) each; or C's fread on a FILE, as llama.cpp's loader reads), each buffer
    copied to its place in one GPU tensor. The tensor and the buffer are made here unless given
    (bench/lab/read_loop.py keeps them from pass to pass); `read_seconds`, a list, gets each read's
    time, and `copy_seconds` each copy's (its synchronize included) after the time making the
    tensor and the buffer took."""
    import ctypes
    size = os.path.getsize(path)
    s0 = time.perf_counter()
    if out is None:
        out = torch.empty(size, dtype=torch.uint8, device="cuda")
    if pinned is None:
        pinned = torch.empty(chunk, dtype=torch.uint8).pin_memory()
    if copy_seconds is not None:
        copy_seconds.append(time.perf_counter() - s0)
    view = memoryview(pinned.numpy())
    libc = process_libc()
    at = 0
    halves = [view[:chunk // 2], view[chunk // 2:]]
    with open(path, "rb", buffering=0) as f:
        fp = libc.fopen(path.encode(), b"rb") if use_fread else None
        while at < size:
            r0 = time.perf_counter()
            if use_preadv:  # two segments, at the loader's own offset
                got = os.preadv(f.fileno(), halves, at)
            else:
                got = (libc.fread(ctypes.c_void_p(pinned.data_ptr()), 1, chunk, fp) if use_fread
                       else f.readinto(view))
            if read_seconds is not None:
                read_seconds.append(time.perf_counter() - r0)
            if not got:
                break
            c0 = time.perf_counter()
            out[at:at + got].copy_(pinned[:got])  # synchronous: the buffer is read again next
            if copy_seconds is not None:
                copy_seconds.append(time.perf_counter() - c0)
            at += got
        if fp:
            libc.fclose(fp)
    return out


def thread_cpu():
    """Each thread of this process: {tid: [name, CPU seconds so far, voluntary and involuntary
    context switches so far]}, from /proc (utime + stime; status), to tell which threads ran
    during a scenario (cmt's copy threads, "cmt-copy"; the program's; torch's own pools), and how
    often each went to sleep or was put off its core."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/self/task/{tid}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = [name, (int(fields[11]) + int(fields[12])) / tick,
                         int(status.get("voluntary_ctxt_switches", 0)),
                         int(status.get("nonvoluntary_ctxt_switches", 0))]
    return out


def threads_during(before, after):
    """What each thread name's threads used between two thread_cpu() snapshots: {name: [CPU
    seconds of each thread that used any, largest first]}."""
    used = {}
    for tid, (name, s, *_) in after.items():
        d = s - before.get(tid, [name, 0.0])[1]
        if d > 0:
            used.setdefault(name, []).append(round(d, 3))
    return {name: sorted(v, reverse=True) for name, v in used.items()}


def switches_during(before, after):
    """The context switches of each thread name's threads between two thread_cpu() snapshots:
    {name: [voluntary (sleeps, naps), involuntary (put off the core)]}, summed. A copy thread
    that naps through each gap between reads switches once a read; one that spins, rarely."""
    out = {}
    for tid, (name, _, vol, invol) in after.items():
        was = before.get(tid, [name, 0.0, 0, 0])
        total = out.setdefault(name, [0, 0])
        total[0] += vol - was[2]
        total[1] += invol - was[3]
    return {name: v for name, v in out.items() if v != [0, 0]}


def staging_times(reads, copies):
    """A staging loader's reads and copies (copies[0]: making its tensor and buffer), in ms: the
    setup, each kind's sum, median and largest five, and the copies in tenths of the run (a slow
    stretch shows where it came)."""
    def ms(v):
        return round(v * 1e3, 2)
    setup, copies = copies[:1], copies[1:]
    out = {"setup_ms": ms(setup[0]) if setup else None}
    for kind, v in (("read", reads), ("copy", copies)):
        if v:
            out[kind] = {"sum_ms": ms(sum(v)), "median_ms": ms(statistics.median(v)),
                         "top_ms": [ms(x) for x in sorted(v, reverse=True)[:5]]}
    if copies:
        n = len(copies)
        out["copy_tenths_ms"] = [ms(sum(copies[i * n // 10:(i + 1) * n // 10])) for i in range(10)]
    return out


def child_files(pt, st, blob, index):
    """Each checkpoint loader once: GB/s over the whole call, CPU s/GB, every byte checked."""
    import numpy as np
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file
    torch.zeros(1, device="cuda")
    names = [name for name, _, _ in index]
    resident = {name: torch.from_numpy(np.fromfile(blob, dtype=np.uint8, count=n, offset=a))
                for name, a, n in index}
    gb = sum(t.numel() for t in resident.values()) / 1e9

    def mmap_then_copy():
        sd = torch.load(pt, mmap=True, weights_only=True)
        return {k: v.to("cuda") for k, v in sd.items()}

    def safe_open_loop():
        with safe_open(st, framework="pt", device="cpu") as f:
            return {k: f.get_tensor(k).to("cuda") for k in names}
    # Where a staging loader's time went (session 40's slow state of the 16 MiB reads, lab/NOTES.md
    # 84, 91): its reads' and copies' times, and which threads used the CPU meanwhile.
    reads, copies, read_s, staged, threads, switches = [], [], {}, {}, {}, {}

    def staging(chunk, **how):
        return lambda: read_through_pinned(torch, st, chunk, read_seconds=reads,
                                           copy_seconds=copies, **how)
    loaders = {"torch-load-cuda": lambda: torch.load(pt, map_location="cuda", weights_only=True),
               "torch-load-mmap": mmap_then_copy, "safe-open": safe_open_loop,
               "load-file": lambda: load_file(st, device="cuda"),
               "read-pinned-1M": staging(1 << 20), "read-pinned-16M": staging(16 << 20),
               "fread-pinned-1M": staging(1 << 20, use_fread=True),
               "fread-pinned-16M": staging(16 << 20, use_fread=True),
               "preadv-pinned-16M": staging(16 << 20, use_preadv=True)}
    with open(st, "rb") as f:  # the whole file's bytes, for the staging loaders' check
        whole = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    results, cpu, windows, ok = {}, {}, {}, True
    for name in FILE_SCENARIOS:
        reads.clear()
        copies.clear()
        before = thread_cpu()
        t0, cpu0, w0 = time.perf_counter(), time.process_time(), time.monotonic_ns()
        loaded = loaders[name]()
        torch.cuda.synchronize()
        results[name] = gb / (time.perf_counter() - t0)
        windows[name] = [w0, time.monotonic_ns()]
        cpu[name] = (time.process_time() - cpu0) / gb
        after = thread_cpu()
        threads[name] = threads_during(before, after)
        switches[name] = switches_during(before, after)
        if reads:
            read_s[name] = round(sum(reads), 4)
            staged[name] = staging_times(reads, copies)
        if "pinned" in name:
            ok &= torch.equal(loaded.cpu(), whole)
        else:
            ok &= all(torch.equal(loaded[k].cpu(), resident[k]) for k in names)
        del loaded
        torch.cuda.empty_cache()
    return {"gbps": results, "cpu_s_per_gb": cpu, "windows_ns": windows, "read_s": read_s,
            "staging": staged, "threads_cpu_s": threads,
            "threads_switches": switches, "check": "ok" if ok else "WRONG BYTES"}


def prepare_files(workdir, blob, index):
    """The tensors as a torch.save'd dict and as a safetensors file, both in the page cache."""
    import numpy as np
    import torch
    from safetensors.torch import save_file
    sd = {name: torch.from_numpy(np.fromfile(blob, dtype=np.uint8, count=n, offset=a))
          for name, a, n in index}
    pt, st = os.path.join(workdir, "model.pt"), os.path.join(workdir, "model.safetensors")
    torch.save(sd, pt)
    save_file(sd, st)
    for path in (pt, st):
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL)
    return pt, st


def prepare_hf(workdir):
    """A random TinyLlama-shaped model saved with save_pretrained (safetensors, one file)."""
    import torch
    import transformers
    cfg = transformers.LlamaConfig(hidden_size=HIDDEN, intermediate_size=INTER,
                                   num_hidden_layers=LAYERS, num_attention_heads=32,
                                   num_key_value_heads=4, vocab_size=VOCAB,
                                   tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    path = os.path.join(workdir, "hf")
    model.save_pretrained(path, max_shard_size="10GB")
    return path


def run_child(cmt, mode_env, record, args):
    env = dict(os.environ)
    # A local model: transformers must not ask the Hub (a machine without a network waits for it).
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    env.update(mode_env)
    cmd = [cmt, "run"] + (["--record", record] if record else []) + ["--", sys.executable,
                                                                     os.path.abspath(__file__)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd + ["--child"] + args, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout)[-600:]}
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    if record:  # beside the trace, with its calls' windows (bench/lab/load_bounds.py reads them)
        with open(os.path.splitext(record)[0] + ".json", "w") as f:
            json.dump(doc, f, indent=1)
    # Each child's figures as it ends, so that a run cut short by a time limit still says them.
    said = {k: ({s: round(v, 1) for s, v in doc[k].items()} if k == "gbps" else doc[k])
            for k in ("gbps", "seconds", "first_seconds", "check") if k in doc}
    cpu = {s: v if v is None else round(v, 2) for s, v in doc.get("cpu_s_per_gb", {}).items()}
    print(f"child {args[0]} {' '.join(f'{k}={v}' for k, v in mode_env.items()) or 'cmt'}"
          f"{' recorded' if record else ''} ({time.perf_counter() - t0:.0f} s): "
          + json.dumps(said) + (f" cpu s/GB {json.dumps(cpu)}" if cpu else ""),
          file=sys.stderr, flush=True)
    return doc


def parse_args(argv):
    """The command line, by argparse: an unknown flag or a missing value is refused with a message
    that names it (a flag misspelt in a device call would otherwise be ignored and cost the call)."""
    p = argparse.ArgumentParser(prog="loaders.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmt", nargs="?", metavar="CMT", help="the cmt launcher to run children with")
    p.add_argument("--child", nargs="+", metavar="ARG", help=argparse.SUPPRESS)  # run_child's
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=REPS)
    add_mode_option(p)
    hf = p.add_mutually_exclusive_group()
    hf.add_argument("--hf", action="store_true")
    hf.add_argument("--hf-only", action="store_true")
    files = p.add_mutually_exclusive_group()
    files.add_argument("--files", action="store_true")
    files.add_argument("--files-only", action="store_true")
    p.add_argument("--record", metavar="DIR")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--workdir", metavar="DIR")
    p.add_argument("--deadline", type=float, metavar="SECONDS")
    args = p.parse_args(argv)
    if not args.child and not args.cmt:
        p.error("CMT, the cmt launcher, is required")
    return args


def summarize(runs, modes):
    rows = {}
    for scenario in runs["default"][0]["gbps"]:
        row = {}
        for m in modes:
            v = [r["gbps"][scenario] for r in runs[m] if scenario in r.get("gbps", {})]
            if v:
                cpu = [r["cpu_s_per_gb"][scenario] for r in runs[m]
                       if scenario in r.get("cpu_s_per_gb", {})]
                row[m] = {"median": statistics.median(v), "runs": v,
                          "spread": (max(v) - min(v)) / statistics.median(v),
                          "cpu_s_per_gb": statistics.median(cpu) if cpu else None}
        rows[scenario] = row
    for scenario, row in rows.items():  # against default and pinned
        key = "pinned-" + (scenario if scenario.startswith("gap") else scenario.split("-")[-1])
        pinned = rows.get(key, {}).get("default", {}).get("median")
        for m, r in row.items():
            r["vs_default"] = r["median"] / row["default"]["median"] if "default" in row else None
            r["vs_pinned"] = r["median"] / pinned if pinned else None
    return rows


def main():
    global REPS
    args = parse_args(sys.argv[1:])
    REPS = args.reps
    if args.child:
        what, rest = args.child[0], args.child[1:]
        if what == "hf":
            doc = child_hf(rest[0])
        elif what == "files":
            doc = child_files(rest[0], rest[1], rest[2], json.load(open(rest[3])))
        else:
            doc = child_copies(rest[0], json.load(open(rest[1])))
        print(json.dumps(doc))
        return 0
    cmt = args.cmt
    rounds = args.rounds
    modes = modes_from(args.mode)
    workdir = args.workdir or tempfile.mkdtemp(prefix="cmt-loaders-")
    os.makedirs(workdir, exist_ok=True)
    blob = os.path.join(workdir, "model.bin")
    index = write_blob(blob)
    json.dump(index, open(blob + ".json", "w"))
    subprocess.run(["cat", blob], stdout=subprocess.DEVNULL)  # in the page cache
    hf = prepare_hf(workdir) if args.hf or args.hf_only else None
    files = prepare_files(workdir, blob, index) if args.files or args.files_only else None
    files_args = ["files", *files, blob, blob + ".json"] if files else None
    doc = dict(machine_meta.meta(cmt, sys.argv), rounds=rounds, reps=REPS, modes=modes,
               bytes=sum(n for _, _, n in index), tensors=len(index))
    runs = {m: [] for m in modes}
    hf_runs = {m: [] for m in modes}
    file_runs = {m: [] for m in modes}
    copies = not args.hf_only and not args.files_only
    order = list(modes.items())
    # --deadline S: start no round that would end more than S seconds after the start, judged by
    # the longest round so far, so that a device call's time limit cuts a round, never the report.
    deadline = args.deadline
    began, longest = time.perf_counter(), 0.0
    for r in range(rounds):
        elapsed = time.perf_counter() - began
        if deadline is not None and r > 0 and elapsed + longest > deadline:
            print(f"--deadline {deadline:.0f} s: stopping after {r} rounds", file=sys.stderr)
            doc["rounds"] = r
            break
        round_began = time.perf_counter()
        # Each round starts one mode further on, so that no mode always runs right after the same
        # one (session 32 ran default, cmt, head in every round, and could not rule out the order).
        for m, env in order[r % len(order):] + order[:r % len(order)]:
            if copies:
                runs[m].append(run_child(cmt, env, None, ["copies", blob, blob + ".json",
                                                          "--reps", str(REPS)]))
            if hf:
                hf_runs[m].append(run_child(cmt, env, None, ["hf", hf]))
            if files:
                file_runs[m].append(run_child(cmt, env, None, files_args))
        longest = max(longest, time.perf_counter() - round_began)
    errors = [r["error"] for m in modes for r in runs[m] + hf_runs[m] + file_runs[m]
              if "error" in r]
    if errors:
        doc["errors"] = errors
        print("errors:", errors[0], file=sys.stderr)
    # The file loaders' scenarios join the copies' (one process each, the same modes and rounds).
    for m in modes:
        for k, r in enumerate(file_runs[m]):
            if k < len(runs[m]) and "gbps" in r and "gbps" in runs[m][k]:
                for key in ("gbps", "cpu_s_per_gb"):
                    runs[m][k][key].update(r[key])
                if r["check"] != "ok":
                    runs[m][k]["check"] = r["check"]
            elif not copies:
                runs[m].append(r)
    # Each file child's reads and threads, scenario by scenario, as they ran (not summarized).
    if files:
        kept = ("gbps", "read_s", "staging", "threads_cpu_s", "threads_switches")
        doc["file_children"] = {m: [{k: r[k] for k in kept if k in r} for r in v]
                                for m, v in file_runs.items()}
    runs = {m: [r for r in v if "gbps" in r] for m, v in runs.items()}
    doc["checks"] = sorted({r["check"] for v in runs.values() for r in v} |
                           {r["check"] for v in hf_runs.values() for r in v if "check" in r})
    doc["scenarios"] = summarize(runs, modes) if runs.get("default") else {}
    if hf:
        doc["hf"] = {m: {"median_s": statistics.median(r["seconds"] for r in v if "seconds" in r),
                         "runs_s": [r["seconds"] for r in v if "seconds" in r],
                         "first_call_runs_s": [r["first_seconds"] for r in v if "seconds" in r]}
                     for m, v in hf_runs.items() if any("seconds" in r for r in v)}
    if args.record:
        out = args.record
        os.makedirs(out, exist_ok=True)
        for m, env in modes.items():
            if m == "default":
                continue
            if copies:  # one pass of each scenario: the trace of what one pass does
                run_child(cmt, env, os.path.join(out, f"loaders-{m}.tsv"),
                          ["copies", blob, blob + ".json", "--reps", "1"])
            if hf:
                run_child(cmt, env, os.path.join(out, f"hf-{m}.tsv"), ["hf", hf])
            if files:
                run_child(cmt, env, os.path.join(out, f"files-{m}.tsv"), files_args)
    report(doc)
    if args.json:
        json.dump(doc, open(args.json, "w"), indent=2)
    if not args.workdir:
        subprocess.run(["rm", "-rf", workdir])
    return 0 if doc["checks"] == ["ok"] else 1


def report(doc):
    print(f"{doc['date']} {doc['gpu']}: {doc['tensors']} tensors, {doc['bytes'] / 1e9:.2f} GB, "
          f"medians of {doc['rounds']} rounds of {doc.get('reps', 1)} passes each (GB/s; x "
          f"default; of pinned); checks {doc['checks']}")
    for scenario, row in doc["scenarios"].items():
        cells = []
        for m, r in row.items():
            cell = f"{m} {r['median']:.1f} [{r['spread'] * 100:.0f}%]"
            if min(r["runs"]) < 0.75 * r["median"]:  # a process far below the rest (NOTES 95)
                cell += f" low {min(r['runs']):.1f}"
            if m != "default" and r["vs_default"]:
                cell += f" {r['vs_default']:.2f}x"
            if r["vs_pinned"] and not scenario.startswith("pinned"):
                cell += f" {r['vs_pinned']:.2f}p"
            if r.get("cpu_s_per_gb") is not None:
                cell += f" cpu {r['cpu_s_per_gb']:.2f}s/GB"
            cells.append(cell)
        print(f"  {scenario:12s} " + "; ".join(cells))
    for m, r in doc.get("hf", {}).items():
        base = doc["hf"].get("default", {}).get("median_s")
        print(f"  hf from_pretrained {m}: {r['median_s']:.3f} s"
              + (f" ({base / r['median_s']:.2f}x default)" if base and m != "default" else "")
              + f" runs {[round(x, 3) for x in r['runs_s']]}"
              + f"; the process's first call {[round(x, 2) for x in r['first_call_runs_s']]}")


if __name__ == "__main__":
    sys.exit(main())
