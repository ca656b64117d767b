#!/usr/bin/env python3
"""Offloaded inference (issue 33): forward passes of a 1.1B Llama (TinyLlama's shapes, bf16, random
weights from a fixed seed) under accelerate's `cpu_offload`, which keeps the weights in host memory
and copies each layer's to the GPU on every pass: the same host buffers copied again and again.

Modes, one process each, rounds alternating them:
  default   cmt run with CMT_DISABLE=1 (CUDA's own pageable copies)
  staged    cmt with its built-in defaults (register = off: every copy staged)
  hot       cmt with CMT_REGISTER=hot (the weights registered once, then copied by the DMA engine)
  pinned    the default process with the offloaded weights in pinned memory (the ceiling)

More modes: --mode NAME:BASE[:KEY=VALUE,...], a base mode above with more environment, e.g.
  --mode pinned-hot:pinned:CMT_DISABLE=0,CMT_REGISTER=hot (pinned weights with cmt on: what cmt
  costs a pass besides its copies).

With --same-process, each process (under cmt with CMT_REGISTER=hot) holds three copies of the
model, offloaded with the same weights: one from pageable memory that cmt registers (hot), one
with its weights pinned (pinned), and one whose passes the main thread makes with
cmt_forward_this_thread(1), so that CUDA makes its copies from pageable memory (default); the
passes rotate through the three, so each ratio is of passes run side by side in one process, on
one CPU and one placement of pages (processes apart moved pinned by 57 ms a pass in session 25,
and by 48 ms within minutes in session 38). `--register off` runs the processes with
CMT_REGISTER=off, so that cmt stages the pageable model's copies (staged in place of hot), and
`--register auto` with CMT_REGISTER=auto (auto in its place);
`--env KEY=VALUE,...` sets more of cmt's environment in every process (settings compared as
staged-against-pinned ratios of processes run one after another).

Each process builds the model, runs 2 passes to warm up, then times --passes more (a 16-token
prompt, one forward each, synchronized). With --same-process each pass's time is also split into
the time inside `Tensor.to` from a CPU tensor (accelerate's blocking `.to()`: the copy and the
stream synchronize PyTorch makes after it) and outside it (the program's own work and kernel
launches), and one more pass counts its synchronizing calls (PyTorch's sync debug mode). Reported: the median pass time of each mode over the
rounds, the spread, each mode against default and against pinned, and the CPU seconds the process
spent per pass. Every mode's last logits must be byte-identical (sha256): the copies moved every
byte. With --record DIR the hot mode runs once more under `cmt run --record`.

usage: offload.py CMT [--rounds N] [--passes N] [--modes M,...] [--mode NAME:BASE[:ENV]]...
                     [--json FILE] [--record DIR]
       offload.py CMT --same-process [--register hot|auto|off] [--env KEY=VALUE,...] [--rounds N]
                     [--passes N] [--json FILE]
"""
import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import machine_meta  # noqa: E402  (bench/machine_meta.py)
from script_args import name_list  # noqa: E402  (bench/script_args.py)


def threads_cpu():
    """CPU seconds each thread of this process has used, summed by thread name (cmt's copy
    threads are "cmt-copy"), so a pass's CPU can be told apart from the program's own."""
    tick = os.sysconf("SC_CLK_TCK")
    used = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = open(f"/proc/self/task/{tid}/stat").read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        used[name] = used.get(name, 0) + (int(fields[11]) + int(fields[12])) / tick
    return used


def main_thread_sched():
    """The calling thread's time on a CPU and waiting for one (ns, /proc/thread-self/schedstat):
    a pass that is as long as its Python thread's CPU time is slow either because the thread
    waited for a CPU or because its CPU ran slower."""
    try:
        run, wait, _ = open("/proc/thread-self/schedstat").read().split()
        return int(run), int(wait)
    except (OSError, ValueError):
        return 0, 0


def build_model(torch):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                         num_attention_heads=32, num_key_value_heads=4, vocab_size=32000)
    return LlamaForCausalLM(config).to(torch.bfloat16).eval()


def timed_pass(torch, model, ids):
    """One forward pass, synchronized: (wall s, process CPU s, logits)."""
    torch.cuda.synchronize()
    c0, t0 = time.process_time(), time.perf_counter()
    logits = model(ids).logits
    torch.cuda.synchronize()
    return time.perf_counter() - t0, time.process_time() - c0, logits


def digest(logits):
    return hashlib.sha256(logits.float().cpu().numpy().tobytes()).hexdigest()


class ToTimer:
    """Seconds the program spends inside `Tensor.to` calls from a CPU tensor (accelerate's hooks
    move each weight with `value.to(device)`): the copy call and, for a blocking `.to`, PyTorch's
    stream synchronize after it, which waits for the copy's DMA and for whatever the stream ran
    before it. A pass's time outside them is the program's own work, which staging must not slow;
    the copy calls alone (cmt's trace) do not tell the two apart where `.to` synchronizes."""

    def __init__(self, torch):
        self.spent = 0.0
        self.calls = 0
        original = torch.Tensor.to

        def timed_to(tensor, *args, **kwargs):
            if tensor.device.type != "cpu":
                return original(tensor, *args, **kwargs)
            t0 = time.perf_counter()
            try:
                return original(tensor, *args, **kwargs)
            finally:
                self.spent += time.perf_counter() - t0
                self.calls += 1

        torch.Tensor.to = timed_to

    def take(self):
        spent, calls = self.spent, self.calls
        self.spent, self.calls = 0.0, 0
        return spent, calls


def syncs_in_a_pass(torch, model, ids):
    """How many synchronizing CUDA calls one pass makes (PyTorch's sync debug mode warns at each
    one: a blocking `.to('cuda')` is a copy and a stream synchronize)."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            model(ids)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    return sum("synchronizing" in str(w.message) for w in seen)


def child_same(passes, first):
    """`first` (hot, auto or staged: cmt's copies of pageable weights), pinned and default passes
    side by side in this one process (module docstring)."""
    import copy
    import ctypes
    import torch
    from accelerate import cpu_offload

    forward_this_thread = ctypes.CDLL(None).cmt_forward_this_thread  # libcmt.so, preloaded
    forward_this_thread.argtypes = [ctypes.c_int]
    base = build_model(torch)
    # The copies made before any is offloaded (offloading moves a model's own weights away).
    modes = [first] + SAME_PROCESS_MODES[1:]
    built = {name: base if name == first else copy.deepcopy(base) for name in modes}
    models, moved = {}, 0
    for name, m in built.items():
        state = {k: (v.pin_memory() if name == "pinned" else v) for k, v in m.state_dict().items()}
        cpu_offload(m, execution_device=torch.device("cuda:0"), state_dict=state)
        models[name] = (m, state)
        moved = sum(v.numel() * v.element_size() for v in state.values())
    ids = torch.arange(16, device="cuda:0").unsqueeze(0)
    times = {name: [] for name in models}
    in_to = {name: [] for name in models}
    digests = {}
    timer = ToTimer(torch)
    with torch.no_grad():
        for i in range(2 + passes):
            k = i % len(modes)  # each mode first in turn
            for name in modes[k:] + modes[:k]:
                forward_this_thread(1 if name == "default" else 0)
                timer.take()
                t, c, logits = timed_pass(torch, models[name][0], ids)
                spent, calls = timer.take()
                forward_this_thread(0)
                if i >= 2:
                    times[name].append((t, c))
                    in_to[name].append(spent)
                digests[name] = digest(logits)
        syncs = syncs_in_a_pass(torch, models[first][0], ids)
    print(json.dumps({"pass_s": {n: [t for t, _ in v] for n, v in times.items()},
                      "cpu_s": {n: [c for _, c in v] for n, v in times.items()},
                      "to_s": in_to, "to_calls_per_pass": calls, "syncs_per_pass": syncs,
                      "sha256": digests, "bytes_per_pass": moved}))


def child(pinned, passes):
    import torch
    from accelerate import cpu_offload

    model = build_model(torch)
    state = {k: (v.pin_memory() if pinned else v) for k, v in model.state_dict().items()}
    cpu_offload(model, execution_device=torch.device("cuda:0"), state_dict=state)
    ids = torch.arange(16, device="cuda:0").unsqueeze(0)
    times = []
    before = {}
    sched0 = (0, 0)
    with torch.no_grad():
        for i in range(2 + passes):
            if i == 2:
                before = threads_cpu()
                sched0 = main_thread_sched()
            t, c, logits = timed_pass(torch, model, ids)
            if i >= 2:
                times.append((t, c))
    after = threads_cpu()
    sched1 = main_thread_sched()
    per_pass = {k: round((v - before.get(k, 0)) / passes, 4) for k, v in after.items()
                if v - before.get(k, 0) > 0}
    moved = sum(v.numel() * v.element_size() for v in state.values())
    print(json.dumps({"pass_s": [t for t, _ in times], "cpu_s": [c for _, c in times],
                      "threads_cpu_s": per_pass,
                      "main_run_ms": round((sched1[0] - sched0[0]) / passes / 1e6, 2),
                      "main_wait_ms": round((sched1[1] - sched0[1]) / passes / 1e6, 2),
                      "sha256": digest(logits), "bytes_per_pass": moved}))


SAME_PROCESS_MODES = ["hot", "pinned", "default"]
BASES = ("default", "staged", "hot", "pinned")


def run(cmt, mode, passes, record=None, extra=None):
    env = dict(os.environ)
    env.pop("CMT_REGISTER", None)
    if mode in ("default", "pinned"):
        env["CMT_DISABLE"] = "1"
    if mode == "hot":
        env["CMT_REGISTER"] = "hot"
    env.update(extra or {})
    cmd = [cmt, "run"] + (["--record", record] if record else []) + ["--", sys.executable,
                                                                       __file__, "--child",
                                                                       mode, str(passes)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{mode} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def spread(xs):
    return f"{min(xs):.3f}-{max(xs):.3f}"


def same_process(cmt, rounds, passes, json_path, register="hot", extra=None):
    """--same-process: `rounds` processes under cmt (CMT_REGISTER=`register`), each rotating
    hot (auto, or staged) / pinned / default."""
    env = dict(os.environ, CMT_REGISTER=register, **(extra or {}))
    env.pop("CMT_DISABLE", None)
    first = "staged" if register == "off" else register
    modes = [first] + SAME_PROCESS_MODES[1:]
    runs = []
    for r in range(rounds):
        cmd = [cmt, "run", "--", sys.executable, __file__, "--child-same", str(passes), first]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"same-process run failed ({p.returncode}):\n{p.stderr[-3000:]}")
        out = json.loads(p.stdout.strip().splitlines()[-1])
        runs.append(out)
        t = out["pass_s"]
        print(f"process {r + 1}: " + ", ".join(
            f"{m} {statistics.median(t[m]) * 1e3:.1f} ms" for m in modes) +
            f"; {first} against pinned, pass by pass: "
            f"{' '.join(f'{p / h:.2f}' for h, p in zip(t[first], t['pinned']))}", flush=True)
    meta = machine_meta.meta(cmt, sys.argv)
    every = {m: [x for run in runs for x in run["pass_s"][m]] for m in modes}
    cpu = {m: [x for run in runs for x in run["cpu_s"][m]] for m in modes}
    # Paired ratios: each pinned pass against the hot (auto, staged) pass of the same rotation, in one
    # process.
    of_pinned = [p / h for run in runs for h, p in zip(run["pass_s"][first], run["pass_s"]["pinned"])]
    of_default = [d / h for run in runs for h, d in zip(run["pass_s"][first], run["pass_s"]["default"])]
    same = len({d for run in runs for d in run["sha256"].values()}) == 1
    print(f"\n{meta['date']} {meta['host']} {meta['gpu']} {meta['cmt_version']}\n"
          f"forward pass of a 1.1B Llama under accelerate.cpu_offload, {first} / pinned / default "
          f"rotating in each of {rounds} processes x {passes} passes ({len(every[first])} of each)"
          f"{', with ' + ','.join(f'{k}={v}' for k, v in extra.items()) if extra else ''}:")
    in_to = {m: [x for run in runs for x in run.get("to_s", {}).get(m, [])] for m in modes}
    for m in modes:
        print(f"  {m:8s} {statistics.median(every[m]) * 1e3:8.1f} ms a pass (spread "
              f"{spread([x * 1e3 for x in every[m]])}), "
              f"{runs[0]['bytes_per_pass'] / statistics.median(every[m]) / 1e9:5.1f} GB/s of "
              f"weights, cpu {statistics.median(cpu[m]):.3f} s a pass")
        if in_to[m]:
            outside = [p - t for p, t in zip(every[m], in_to[m])]
            print(f"           inside .to() from the CPU {statistics.median(in_to[m]) * 1e3:7.1f} ms"
                  f" a pass (spread {spread([x * 1e3 for x in in_to[m]])}), outside "
                  f"{statistics.median(outside) * 1e3:7.1f} ms (spread "
                  f"{spread([x * 1e3 for x in outside])})")
    if "syncs_per_pass" in runs[0]:
        print(f"  a pass makes {runs[0]['to_calls_per_pass']} .to() calls from the CPU and "
              f"{runs[0]['syncs_per_pass']} synchronizing CUDA calls (PyTorch's sync debug mode)")
    print(f"  {first} against pinned, pass by pass: median {statistics.median(of_pinned):.3f} of pinned "
          f"speed (spread {spread(of_pinned)}); against default: median "
          f"{statistics.median(of_default):.2f}x (spread {spread(of_default)})")
    print(f"logits identical in every mode and process: {'yes' if same else 'NO'}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(dict(meta, runs=runs, first=first, env=extra or {},
                           hot_of_pinned=of_pinned, hot_over_default=of_default,
                           median_s={m: statistics.median(every[m]) for m in modes},
                           identical=same), f, indent=1)
    return 0 if same else 1


def parse_args(argv):
    """The command line, by argparse: an unknown flag or a bad value is refused, named."""
    p = argparse.ArgumentParser(prog="offload.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmt", nargs="?", metavar="CMT", help="the cmt launcher to run children with")
    p.add_argument("--child", nargs=2, metavar=("MODE", "PASSES"), help=argparse.SUPPRESS)
    p.add_argument("--child-same", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--passes", type=int, default=5)
    p.add_argument("--same-process", action="store_true")
    p.add_argument("--register", choices=("hot", "auto", "off"), default="hot")
    p.add_argument("--env", type=cmt_env, default={}, metavar="CMT_KEY=VALUE,...")
    # --modes hot,pinned,...: those modes only, in that order (a short device call prints each as
    # it ends).
    p.add_argument("--modes", type=name_list(BASES, "mode"), default=",".join(BASES),
                   metavar="M,...")
    p.add_argument("--mode", action="append", default=[], type=extra_mode,
                   metavar="NAME:BASE[:KEY=VALUE,...]")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--record", metavar="DIR")
    args = p.parse_args(argv)
    if not args.child and not args.child_same and not args.cmt:
        p.error("CMT, the cmt launcher, is required")
    names = list(args.modes)
    for name, _, _ in args.mode:
        if name in names:
            p.error(f"--mode {name}: that name is taken; give the mode a new one")
        names.append(name)
    return args


def cmt_env(text):
    pairs = [kv for kv in text.split(",") if kv]
    if any("=" not in kv or not kv.startswith("CMT_") for kv in pairs):
        raise argparse.ArgumentTypeError(f"{text!r}: expected CMT_KEY=VALUE,...")
    return dict(kv.split("=", 1) for kv in pairs)


def extra_mode(text):
    """NAME:BASE[:KEY=VALUE,...] as (name, base, {key: value})."""
    parts = text.split(":", 2)
    pairs = [kv for kv in parts[2].split(",") if kv] if len(parts) == 3 else []
    if len(parts) < 2 or not parts[0] or parts[1] not in BASES or any("=" not in kv for kv in pairs):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME:BASE[:KEY=VALUE,...] with BASE one of {', '.join(BASES)}")
    return parts[0], parts[1], dict(kv.split("=", 1) for kv in pairs)


def main():
    args = parse_args(sys.argv[1:])
    if args.child:
        return child(args.child[0] == "pinned", int(args.child[1]))
    if args.child_same:
        return child_same(int(args.child_same[0]),
                          args.child_same[1] if len(args.child_same) > 1 else "hot")
    cmt, rounds, passes = args.cmt, args.rounds, args.passes
    if args.same_process:
        return same_process(cmt, rounds, passes, args.json, args.register, args.env)
    modes = list(args.modes)
    how = {m: (m, {}) for m in modes}  # name -> (base mode, extra environment)
    for name, base, extra in args.mode:
        how[name] = (base, extra)
        modes.append(name)
    results = {m: [] for m in modes}
    digests = set()
    for r in range(rounds):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for m in order:
            out = run(cmt, how[m][0], passes, extra=how[m][1])
            med = statistics.median(out["pass_s"])
            results[m].append({"pass_s": med, "cpu_s": statistics.median(out["cpu_s"]),
                               "bytes": out["bytes_per_pass"],
                               "threads_cpu_s": out.get("threads_cpu_s", {}),
                               "main_run_ms": out.get("main_run_ms"),
                               "main_wait_ms": out.get("main_wait_ms")})
            digests.add(out["sha256"])
            print(f"round {r + 1} {m:11s} pass {med * 1e3:8.1f} ms "
                  f"({out['bytes_per_pass'] / med / 1e9:5.1f} GB/s of weights) "
                  f"cpu {statistics.median(out['cpu_s']):.3f} s; by thread name, s a pass: "
                  f"{out.get('threads_cpu_s', {})}; main thread a pass: on a CPU "
                  f"{out.get('main_run_ms')} ms, waiting for one {out.get('main_wait_ms')} ms",
                  flush=True)
    meta = machine_meta.meta(cmt, sys.argv)
    print(f"\n{meta['date']} {meta['host']} {meta['gpu']} {meta['cmt_version']}\n"
          f"forward pass of a 1.1B Llama under accelerate.cpu_offload, median of {rounds} rounds "
          f"x {passes} passes:")
    med = {m: statistics.median(x["pass_s"] for x in results[m]) for m in modes}
    for m in modes:
        xs = [x["pass_s"] for x in results[m]]
        cpu = statistics.median(x["cpu_s"] for x in results[m])
        gb = statistics.median(x["bytes"] for x in results[m]) / 1e9
        # cmt's copy threads' share, from the per-thread counts (staging's CPU; none when the
        # weights are registered or pinned).
        copy = statistics.median(x["threads_cpu_s"].get("cmt-copy", 0) for x in results[m])
        against = (f", {med['default'] / med[m]:5.2f}x default" if "default" in med else "") + (
            f", {med['pinned'] / med[m]:4.2f} of pinned speed" if "pinned" in med else "")
        print(f"  {m:11s} {med[m] * 1e3:8.1f} ms (spread {min(xs) * 1e3:.1f}-{max(xs) * 1e3:.1f})"
              f"{against}, cpu {cpu:.3f} s/pass, {cpu / gb:.3f} s/GB of weights moved "
              f"(cmt's copy threads {copy / gb:.3f})")
    same = len(digests) == 1
    print(f"logits identical in every mode and round: {'yes' if same else 'NO'}")
    if args.record:
        os.makedirs(args.record, exist_ok=True)
        run(cmt, "hot", passes, os.path.join(args.record, "offload-hot.tsv"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta, rounds=results, median_s=med, identical=same), f, indent=1)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
