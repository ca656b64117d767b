#!/usr/bin/env python3
"""Everyday PyTorch workloads, each run without and with cmt, results checked.

  to_cuda_cpu       torch.from_numpy(a).to('cuda') and .cpu() of 1 GiB, 3 times
  safetensors_load  safetensors.torch.load_file(..., device='cuda') of a synthetic 4 GiB model
                    (written once beforehand, so it sits in the page cache)
  save_load         torch.save of a 2 GiB CUDA state dict to a file, then torch.load onto the GPU
  dcp_save          torch.distributed.checkpoint.save of a 2 GiB CUDA model, one process
  resnet152_offload ResNet-152 (torchvision, random weights) training steps, batch 32, under
                    torch.autograd.graph.save_on_cpu(): activations go to pageable CPU memory
                    and back every step

Each workload runs in its own process; runs without cmt (`cmt run` with CMT_DISABLE=1, the same
launcher) and with cmt alternate. The table gives median seconds, the ratio, the copies cmt took and the seconds spent in
them (median of the runs with cmt), the memcpy/memmove calls its host copier took (into or out of
CUDA host memory) and the seconds in them, and the check.

usage: run_all.py CMT_EXECUTABLE [--rounds N] [--only a,b] [--json FILE]
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

GiB = 1 << 30
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import machine_meta  # noqa: E402  (bench/machine_meta.py)
from script_args import name_list  # noqa: E402  (bench/script_args.py)


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().view(-1).view(torch_uint8()).numpy().tobytes())
    return h.hexdigest()[:16]


def torch_uint8():
    import torch
    return torch.uint8


def synthetic_state(n_tensors, total, device, seed):
    import torch
    g = torch.Generator(device="cpu").manual_seed(seed)
    each = total // n_tensors // 2  # float16: 2 bytes each
    return {f"layer{i}.weight": torch.randn(each, generator=g, dtype=torch.float32).to(torch.float16).to(device)
            for i in range(n_tensors)}


def w_to_cuda_cpu(tmp):
    import numpy as np
    import torch
    a = np.random.default_rng(1).integers(0, 256, GiB, dtype=np.uint8)
    t = torch.from_numpy(a)
    t0 = time.perf_counter()
    for _ in range(3):
        g = t.to("cuda")
        back = g.cpu()
        ok = np.array_equal(back.numpy(), a)
        if not ok:
            break
        del g, back
    return time.perf_counter() - t0, "ok" if ok else "WRONG BYTES"


def w_safetensors_load(tmp):
    import torch
    from safetensors.torch import load_file
    path = os.path.join(tmp, "model.safetensors")
    expected = json.load(open(path + ".digest"))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    state = load_file(path, device="cuda")
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    got = digest([state[k] for k in sorted(state)])
    return seconds, "ok" if got == expected else f"WRONG ({got} != {expected})"


def w_save_load(tmp):
    import torch
    state = synthetic_state(16, 2 * GiB, "cuda", 5)
    want = digest([state[k] for k in sorted(state)])
    path = os.path.join(tmp, f"state-{os.getpid()}.pt")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.save(state, path)
    loaded = torch.load(path, map_location="cuda")
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    os.unlink(path)
    got = digest([loaded[k] for k in sorted(loaded)])
    return seconds, "ok" if got == want else "WRONG BYTES"


def w_dcp_save(tmp):
    import torch
    import torch.distributed.checkpoint as dcp
    state = synthetic_state(16, 2 * GiB, "cuda", 6)
    want = digest([state[k] for k in sorted(state)])
    where = os.path.join(tmp, f"dcp-{os.getpid()}")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    dcp.save(state, checkpoint_id=where)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    back = {k: torch.zeros_like(v) for k, v in state.items()}
    dcp.load(back, checkpoint_id=where)
    subprocess.run(["rm", "-rf", where])
    got = digest([back[k] for k in sorted(back)])
    return seconds, "ok" if got == want else "WRONG BYTES"


def w_resnet152_offload(tmp):
    import torch
    import torchvision
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    model = torchvision.models.resnet152(weights=None).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (32,), device="cuda")
    losses = []
    for step in range(4):
        if step == 1:  # the first step warms up cuDNN and the allocator
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        with torch.autograd.graph.save_on_cpu(pin_memory=False):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    ok = all(l == l and abs(l) < 1e4 for l in losses)
    return seconds, ("ok" if ok else "NaN loss") + " loss[0]=%.6f" % losses[0]


WORKLOADS = {
    "to_cuda_cpu": w_to_cuda_cpu,
    "safetensors_load": w_safetensors_load,
    "save_load": w_save_load,
    "dcp_save": w_dcp_save,
    "resnet152_offload": w_resnet152_offload,
}


def child(name, tmp):
    try:
        seconds, check = WORKLOADS[name](tmp)
    except ImportError as e:
        print(json.dumps({"skipped": str(e)}))
        return
    print(json.dumps({"seconds": seconds, "check": check}))


def prepare(tmp, names):
    if "safetensors_load" not in names:
        return
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError:
        return
    state = synthetic_state(32, 4 * GiB, "cpu", 4)
    path = os.path.join(tmp, "model.safetensors")
    save_file(state, path)
    json.dump(digest([state[k] for k in sorted(state)]), open(path + ".digest", "w"))


def run(cmt, name, tmp, with_cmt):
    stats = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    env = dict(os.environ, CMT_STATS=stats)
    if not with_cmt:
        env["CMT_DISABLE"] = "1"
    p = subprocess.run([cmt, "run", "--", sys.executable, __file__, "--child", name, tmp],
                       env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout)[-800:]}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    try:
        s = json.load(open(stats))
        out["taken"] = s["taken"]["h2d"]["calls"] + s["taken"]["d2h"]["calls"]
        # Time inside the copies cmt took: what is left of the run went elsewhere.
        out["copy_s"] = s["taken"]["h2d"]["seconds"] + s["taken"]["d2h"]["seconds"]
        # memcpy/memmove calls into or out of CUDA host memory that cmt's threads made.
        out["host_taken"] = s["host_copies"]["calls"]
        out["host_s"] = s["host_copies"]["seconds"]
    except (OSError, ValueError, KeyError):
        out["taken"], out["copy_s"] = 0, 0.0
    out.setdefault("host_taken", 0)
    out.setdefault("host_s", 0.0)
    os.unlink(stats)
    return out


def parse_args(argv):
    """The command line, by argparse: an unknown flag or workload is refused, named."""
    p = argparse.ArgumentParser(prog="run_all.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmt", nargs="?", metavar="CMT_EXECUTABLE")
    p.add_argument("--child", nargs=2, metavar=("NAME", "TMP"), help=argparse.SUPPRESS)  # run's
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--only", type=name_list(list(WORKLOADS), "workload"), default=list(WORKLOADS),
                   metavar="a,b")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    if not args.child and not args.cmt:
        p.error("CMT_EXECUTABLE, the cmt launcher, is required")
    return args


def main():
    args = parse_args(sys.argv[1:])
    if args.child:
        return child(*args.child)
    cmt, rounds, names = args.cmt, args.rounds, args.only
    tmp = tempfile.mkdtemp(prefix="cmt-workloads-")
    prepare(tmp, names)
    rows = {}
    for name in names:
        runs = {"default": [], "cmt": []}
        for _ in range(rounds):
            for mode in ("default", "cmt"):
                runs[mode].append(run(cmt, name, tmp, mode == "cmt"))
        flat = runs["default"] + runs["cmt"]
        if any("skipped" in r for r in flat):
            rows[name] = {"skipped": next(r["skipped"] for r in flat if "skipped" in r)}
        elif any("error" in r for r in flat):
            rows[name] = {"error": next(r["error"] for r in flat if "error" in r)}
        else:
            d = statistics.median(r["seconds"] for r in runs["default"])
            c = statistics.median(r["seconds"] for r in runs["cmt"])
            checks = sorted({r["check"].split(" ")[0] for r in flat})
            rows[name] = {"default_s": d, "cmt_s": c, "ratio": d / c,
                          "default_runs_s": [r["seconds"] for r in runs["default"]],
                          "cmt_runs_s": [r["seconds"] for r in runs["cmt"]],
                          "check": "ok" if checks == ["ok"] else ",".join(checks),
                          "detail": [r["check"] for r in flat],
                          "taken_by_cmt": sum(r["taken"] for r in runs["cmt"]),
                          "cmt_copy_s": statistics.median(r["copy_s"] for r in runs["cmt"]),
                          "host_copies_taken": sum(r["host_taken"] for r in runs["cmt"]),
                          "cmt_host_copy_s": statistics.median(r["host_s"] for r in runs["cmt"]),
                          "taken_when_disabled": sum(r["taken"] for r in runs["default"])}
        print(name, json.dumps(rows[name])[:300], flush=True)
        if args.json:  # after each workload, so a run cut short keeps what it has
            doc = dict(machine_meta.meta(cmt, sys.argv), rounds=rounds, rows=rows)
            json.dump(doc, open(args.json, "w"), indent=2)
    subprocess.run(["rm", "-rf", tmp])
    print()
    print("| workload | without cmt (s) | with cmt (s) | speed-up | copies taken | in them (s) | host copies taken | in them (s) | check |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, r in rows.items():
        if "skipped" in r or "error" in r:
            print(f"| {name} | | | | | | | | {'skipped: ' + r['skipped'] if 'skipped' in r else 'FAILED'} |")
            continue
        print(f"| {name} | {r['default_s']:.2f} | {r['cmt_s']:.2f} | {r['ratio']:.2f}x | "
              f"{r['taken_by_cmt']} | {r['cmt_copy_s']:.2f} | {r['host_copies_taken']} | "
              f"{r['cmt_host_copy_s']:.2f} | {r['check']} |")
    bad = [n for n, r in rows.items() if "error" in r or ("check" in r and r["check"] != "ok")]
    if bad:
        print("FAILED:", ", ".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main()
