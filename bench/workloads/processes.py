#!/usr/bin/env python3
"""Several PyTorch processes moving a model at once, on one GPU, as a machine runs them when
several programs share it (inference workers starting together, a sweep's trials, test runners):
each process holds its own copy of a 1.1B Llama's tensors (TinyLlama's shapes, bf16, 2.2 GB,
random bytes, resident), then, on the parent's word, all processes at once copy every tensor to
the GPU with `.to('cuda')` (h2d) and, on its next word, every one back into a resident tensor of
its own with `Tensor.copy_` (d2h); every byte is checked afterwards.

Modes, each a set of processes under the same launcher: `default` (cmt run with CMT_DISABLE=1),
`cmt` (built-in defaults), `pinned` (the tensors pinned, both ways, CMT_DISABLE=1: the link's
ceiling) and any `--mode NAME:VAR=VALUE,...` (cmt with those variables, e.g. another build's library
with CMT_LIBRARY). For each round, each process count (`--processes`) and each mode (one further
on each round), the figures: all processes' bytes over the span from the first start to the last
end, each way; the slowest process's own rate; and the processes' CPU seconds per GB moved
(their copy threads' included), medians over the rounds with their spread.

usage: processes.py CMT [--processes 1,4,8] [--rounds N] [--mode NAME:VAR=VAL,...]...
                    [--json FILE] [--deadline SECONDS]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import machine_meta  # noqa: E402  (bench/machine_meta.py)
from loaders import shapes  # noqa: E402  (the model's tensor shapes)
from script_args import add_mode_option, modes_from  # noqa: E402  (bench/script_args.py)


def child(pinned, seed):
    """One process: make the tensors, say ready, copy them each way on the parent's word."""
    import numpy as np
    import torch
    torch.zeros(1, device="cuda")  # CUDA started before the window
    rng = np.random.default_rng(seed)
    host = []
    for _, shape in shapes():
        n = shape[0] * shape[1]  # a multiple of 4: 64-bit draws, the generator's own (fast)
        t = torch.from_numpy(rng.bit_generator.random_raw(n // 4).view(np.int16))
        t = t.view(torch.bfloat16).reshape(shape)
        host.append(t.pin_memory() if pinned else t)
    back = [torch.zeros(t.shape, dtype=t.dtype, pin_memory=pinned) for t in host]  # resident
    host[-1].to("cuda")  # the first copy's set-up, outside the window
    torch.cuda.synchronize()
    total = sum(t.numel() * 2 for t in host)
    windows = {}

    def window(name, body):
        print(name + " ready", flush=True)
        sys.stdin.readline()  # the parent's word
        cpu, start = time.process_time(), time.monotonic()
        out = body()
        torch.cuda.synchronize()
        windows[name] = {"start": start, "end": time.monotonic(),
                         "cpu_s": time.process_time() - cpu, "bytes": total}
        return out

    gpu = window("h2d", lambda: [t.to("cuda") for t in host])
    window("d2h", lambda: [b.copy_(g) for b, g in zip(back, gpu)])
    right = all(torch.equal(g.cpu().view(torch.int16), t.view(torch.int16)) and
                torch.equal(b.view(torch.int16), t.view(torch.int16))
                for g, b, t in zip(gpu, back, host))
    print(json.dumps({"windows": windows, "right": right}), flush=True)


def run_set(cmt, env, pinned, count, seed):
    """`count` processes of one mode, each way in step; their reports, or an error."""
    cmd = [cmt, "run", "--", sys.executable, os.path.abspath(__file__), "--child",
           "pinned" if pinned else "pageable"]
    procs = [subprocess.Popen(cmd + [str(seed + i)], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(count)]
    try:
        for name in ("h2d", "d2h"):
            for p in procs:  # every process ready, then the word to all
                line = p.stdout.readline()
                if line.strip() != name + " ready":
                    raise RuntimeError(f"a process said {line!r}: {p.stderr.read()[-600:]}")
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
        reports = [json.loads(p.stdout.readline()) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None and p.stdin:
                p.stdin.close()
        for p in procs:
            p.wait(timeout=60)
    return reports


def figures(reports):
    """One set's figures each way: aggregate GB/s, the slowest process's, CPU s/GB."""
    out = {"right": all(r["right"] for r in reports)}
    for way in ("h2d", "d2h"):
        w = [r["windows"][way] for r in reports]
        moved = sum(x["bytes"] for x in w)
        span = max(x["end"] for x in w) - min(x["start"] for x in w)
        out[way] = {"gbps": moved / span / 1e9,
                    "slowest_gbps": min(x["bytes"] / (x["end"] - x["start"]) / 1e9 for x in w),
                    "cpu_s_per_gb": sum(x["cpu_s"] for x in w) / (moved / 1e9)}
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(prog="processes.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmt", nargs="?", metavar="CMT", help="the cmt launcher to run processes with")
    p.add_argument("--child", nargs=2, metavar=("KIND", "SEED"), help=argparse.SUPPRESS)
    p.add_argument("--processes", default="1,4,8",
                   type=lambda s: [int(n) for n in s.split(",") if int(n) > 0] or [1])
    p.add_argument("--rounds", type=int, default=2)
    add_mode_option(p)
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--deadline", type=float, metavar="SECONDS")
    args = p.parse_args(argv)
    if not args.child and not args.cmt:
        p.error("the cmt launcher is required (e.g. build/cmt)")
    return args


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main():
    args = parse_args(sys.argv[1:])
    if args.child:
        return child(args.child[0] == "pinned", int(args.child[1]))
    modes = modes_from(args.mode)
    modes["pinned"] = {"CMT_DISABLE": "1"}
    names = list(modes)
    runs = {}  # (mode, processes) -> [figures of each round]
    begun, longest = time.monotonic(), 0.0
    for r in range(args.rounds):
        if args.deadline and time.monotonic() - begun + longest > args.deadline:
            print(f"deadline: {r} rounds done", file=sys.stderr)
            break
        t0 = time.monotonic()
        for count in args.processes:
            for name in names[r % len(names):] + names[:r % len(names)]:
                env = dict(os.environ, **modes[name])
                f = figures(run_set(args.cmt, env, name == "pinned", count, 1000 * r + 1))
                runs.setdefault((name, count), []).append(f)
                print(f"round {r + 1} {count} x {name}: h2d {f['h2d']['gbps']:.1f} d2h "
                      f"{f['d2h']['gbps']:.1f} GB/s{'' if f['right'] else ' WRONG BYTES'}",
                      file=sys.stderr, flush=True)
        longest = max(longest, time.monotonic() - t0)
    doc = dict(machine_meta.meta(args.cmt, sys.argv), tensors=len(shapes()),
               bytes_per_process=sum(a * b * 2 for _, (a, b) in shapes()), results=[])
    for count in args.processes:
        row = {"processes": count}
        for name in names:
            got = runs.get((name, count), [])
            if not got:
                continue
            row[name] = {"right": all(f["right"] for f in got)}
            for way in ("h2d", "d2h"):
                row[name][way] = {k: spread([f[way][k] for f in got])
                                  for k in ("gbps", "slowest_gbps", "cpu_s_per_gb")}
        doc["results"].append(row)
    report(doc, names)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0 if all(row[n]["right"] for row in doc["results"] for n in names if n in row) else 1


def report(doc, names):
    print(f"{doc['date']} {doc['gpu']}: {doc['tensors']} tensors, "
          f"{doc['bytes_per_process'] / 1e9:.2f} GB a process; medians [spread] of the rounds")
    for row in doc["results"]:
        for way in ("h2d", "d2h"):
            cells = []
            for n in names:
                if n not in row:
                    continue
                g, c = row[n][way]["gbps"], row[n][way]["cpu_s_per_gb"]
                ratio = ""
                if n != "default" and "default" in row:
                    ratio = f" {g['median'] / row['default'][way]['gbps']['median']:.2f}x"
                cells.append(f"{n} {g['median']:.1f} [{g['min']:.1f}-{g['max']:.1f}]{ratio} "
                             f"cpu {c['median']:.2f}s/GB")
            print(f"  {row['processes']} x {way}: " + "; ".join(cells))


if __name__ == "__main__":
    sys.exit(main())
