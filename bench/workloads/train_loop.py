#!/usr/bin/env python3
"""A training loop fed by a PyTorch DataLoader, as most image-training scripts are written (issue
32: real programs copy in sequences with work in between): DataLoader worker processes (fork)
make batches of 128 float32 images, 3 x 224 x 224 (77 MiB), which reach the main process in
shared memory (a fresh mapping of each batch); the main process moves each batch to the GPU with
`.to('cuda', non_blocking=True)`, runs a step and reads the loss (`loss.item()`, as a loop that
logs every step does). Scenarios:

  light         the step is a little GPU work (a few bf16 matmuls, ~1 ms): the loop is bound by
                the copy and the loader
  resnet18      torchvision's ResNet-18, bf16 autocast, forward, backward and an SGD step (skipped
                without torchvision)
  *-pin         the same with DataLoader(pin_memory=True): the loader's pin thread copies each
                batch into pinned memory and the copy to the GPU is asynchronous (what a user
                tuning by hand would do)
  loader-only   the loader alone, no GPU: the pace the workers can feed

Each process is one mode, `default` (cmt run with CMT_DISABLE=1) or `cmt` (built-in defaults),
plus any `--mode NAME:VAR=VALUE,...`; rounds alternate the modes, each round one mode further on.
Reported: ms per step (median of the rounds; each process's figure its steps after the third,
waits for the loader included, over their number), its spread, each mode against default, and the main process's CPU seconds per
step (cmt's copy threads included, the workers not). The first two batches of every scenario are
read back from the GPU and compared with what the loader gave.

usage: train_loop.py CMT [--rounds N] [--steps N] [--workers N] [--batch N]
                     [--mode NAME:VAR=VAL,...]...
                     [--only a,b] [--json FILE] [--deadline SECONDS]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import machine_meta  # noqa: E402  (bench/machine_meta.py)
from script_args import add_mode_option, modes_from, name_list  # noqa: E402  (bench/script_args.py)

IMAGE = (3, 224, 224)
SCENARIOS = ("light", "light-pin", "resnet18", "resnet18-pin", "loader-only")


BATCH = 128  # --batch


def parse_args(argv):
    """The command line, by argparse: an unknown flag or a bad value is refused, named."""
    p = argparse.ArgumentParser(prog="train_loop.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmt", nargs="?", metavar="CMT", help="the cmt launcher to run children with")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # run_child's
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--batch", type=int, default=BATCH)
    add_mode_option(p)
    p.add_argument("--only", default=",".join(SCENARIOS), metavar="a,b",
                   type=name_list(SCENARIOS, "scenario"))
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--deadline", type=float, default=0.0, metavar="SECONDS")
    args = p.parse_args(argv)
    if not args.child and not args.cmt:
        p.error("CMT, the cmt launcher, is required")
    return args


class Images:
    """A dataset of float32 images, each a cheap slice of a few random ones the worker made (so
    the workers' pace is set by the batches they assemble, as after decoding, not by a RNG)."""

    def __init__(self, length):
        self.length, self.base = length, None

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        import torch
        if self.base is None:
            g = torch.Generator().manual_seed(os.getpid())
            self.base = torch.rand((8,) + IMAGE, generator=g)
        return self.base[i % 8] * (1.0 + i * 1e-6), i % 1000


def make_step(torch, scenario):
    """The GPU work of one step on a batch: returns step(x, y) -> loss tensor."""
    if scenario.startswith("resnet18"):
        import torchvision
        model = torchvision.models.resnet18().cuda().to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = torch.nn.CrossEntropyLoss()

        def step(x, y):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(model(x.to(memory_format=torch.channels_last)), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss
        return step
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64

    def step(x, y):
        h = x.view(x.shape[0], -1)[:, :4096].to(torch.bfloat16)
        h = torch.nn.functional.pad(h, (0, 0, 0, 4096 - h.shape[0]))
        for _ in range(6):
            h = torch.tanh(h @ w)
        return h.float().mean() + y.float().mean() * 0
    return step


def run_scenario(torch, scenario, steps, workers):
    """ms per step after 3 warm-up steps, CPU s per step, and whether the bytes held."""
    from torch.utils.data import DataLoader
    pin = scenario.endswith("-pin")
    loader = DataLoader(Images((steps + 3) * BATCH), batch_size=BATCH, num_workers=workers,
                        pin_memory=pin, prefetch_factor=2)
    if scenario == "loader-only":
        for k, _ in enumerate(loader):
            if k == 2:
                t0 = time.perf_counter()
        return {"ms": (time.perf_counter() - t0) / steps * 1e3, "cpu_s": None, "ok": True}
    step = make_step(torch, scenario)
    ok = True
    for k, (x, y) in enumerate(loader):
        xg = x.to("cuda", non_blocking=True)
        yg = y.to("cuda", non_blocking=True)
        loss = step(xg, yg).item()  # a loop that logs its loss every step
        if k < 2:
            ok &= torch.equal(xg.cpu(), x) and torch.equal(yg.cpu(), y)
        if k == 2:  # the clock runs from the end of the third step: waits for the loader count
            t0, c0 = time.perf_counter(), time.process_time()
        assert loss == loss, "NaN loss"
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    del loader
    return {"ms": seconds / steps * 1e3, "cpu_s": cpu / steps, "ok": ok}


def child(steps, workers, only):
    import torch
    torch.zeros(1, device="cuda")
    out = {"ms": {}, "cpu_s_per_step": {}, "check": "ok"}
    for scenario in only:
        if scenario.startswith("resnet18"):
            try:
                import torchvision  # noqa: F401
            except ImportError:
                continue
        r = run_scenario(torch, scenario, steps, workers)
        out["ms"][scenario] = r["ms"]
        out["cpu_s_per_step"][scenario] = r["cpu_s"]
        if not r["ok"]:
            out["check"] = "WRONG BYTES"
    return out


def run_child(cmt, env_add, args):
    env = dict(os.environ)
    env.update(env_add)
    t0 = time.perf_counter()
    p = subprocess.run([cmt, "run", "--", sys.executable, os.path.abspath(__file__), "--child"]
                       + args, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"child failed: {(p.stderr or p.stdout)[-600:]}", file=sys.stderr)
        return None
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"child {' '.join(f'{k}={v}' for k, v in env_add.items()) or 'cmt'} "
          f"({time.perf_counter() - t0:.0f} s): "
          + json.dumps({s: round(v, 2) for s, v in doc["ms"].items()}) + f" {doc['check']}",
          file=sys.stderr, flush=True)
    return doc


def summarize(runs):
    table = {}
    base = runs.get("default", [])
    for scenario in SCENARIOS:
        row = {}
        for m, docs in runs.items():
            ms = [d["ms"][scenario] for d in docs if scenario in d["ms"]]
            if not ms:
                continue
            cpu = [d["cpu_s_per_step"][scenario] for d in docs
                   if d["cpu_s_per_step"].get(scenario) is not None]
            b = [d["ms"][scenario] for d in base if scenario in d["ms"]]
            row[m] = {"median_ms": statistics.median(ms), "runs_ms": ms,
                      "spread": (max(ms) - min(ms)) / statistics.median(ms),
                      "vs_default": statistics.median(b) / statistics.median(ms) if b else None,
                      "cpu_s_per_step": statistics.median(cpu) if cpu else None}
        if row:
            table[scenario] = row
    return table


def report(doc):
    print(f"{doc['date']} {doc['gpu']}: batches of {BATCH} x {IMAGE} float32 "
          f"({BATCH * 3 * 224 * 224 * 4 / 2**20:.0f} MiB), {doc['workers']} workers, "
          f"ms per step, medians of {doc['rounds']} rounds (x default); checks {doc['checks']}")
    for scenario, row in doc["scenarios"].items():
        cells = []
        for m, r in row.items():
            cell = f"{m} {r['median_ms']:.2f} [{r['spread'] * 100:.0f}%]"
            if m != "default" and r["vs_default"]:
                cell += f" {r['vs_default']:.2f}x"
            if r["cpu_s_per_step"] is not None:
                cell += f" cpu {r['cpu_s_per_step'] * 1e3:.1f} ms"
            cells.append(cell)
        print(f"  {scenario:13s} " + "; ".join(cells))


def main():
    global BATCH
    args = parse_args(sys.argv[1:])
    BATCH = args.batch
    steps, workers, only = args.steps, args.workers, args.only
    if args.child:
        print(json.dumps(child(steps, workers, only)))
        return 0
    cmt, rounds = args.cmt, args.rounds
    modes = modes_from(args.mode)
    deadline = args.deadline
    doc = dict(machine_meta.meta(cmt, sys.argv), rounds=rounds, steps=steps, workers=workers,
               batch=BATCH, image=IMAGE, modes=modes)
    runs = {m: [] for m in modes}
    order = list(modes.items())
    began, longest = time.perf_counter(), 0.0
    for r in range(rounds):
        if deadline and r > 0 and time.perf_counter() - began + longest > deadline:
            print(f"--deadline {deadline:.0f} s: stopping after {r} rounds", file=sys.stderr)
            doc["rounds"] = r
            break
        t0 = time.perf_counter()
        for m, env in order[r % len(order):] + order[:r % len(order)]:
            d = run_child(cmt, env, ["--steps", str(steps), "--workers", str(workers),
                                     "--batch", str(BATCH), "--only", ",".join(only)])
            if d:
                runs[m].append(d)
        longest = max(longest, time.perf_counter() - t0)
    doc["checks"] = sorted({d["check"] for v in runs.values() for d in v}) or ["no runs"]
    doc["scenarios"] = summarize(runs)
    report(doc)
    if args.json:
        json.dump(doc, open(args.json, "w"), indent=2)
    return 0 if doc["checks"] == ["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
