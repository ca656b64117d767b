#!/usr/bin/env python3
"""A Python framework under cmt: 1 GiB host -> GPU -> host, bytes checked, with and without cmt,
each in its own process, alternating; cmt's statistics say whether (and through which hooks) the
copies were taken.

  torch: torch.from_numpy(a).to('cuda') and .cpu()   (dynamic cudart: runtime hooks)
  cupy:  cp.asarray(a) and .get()
  jax:   jax.device_put(a) and np.asarray(x)           (XLA: driver API through cuGetProcAddress)

usage: gpu_framework_test.py CMT_EXECUTABLE torch|cupy|jax [--require-taken] [--json FILE]
exit 77 where the framework or a GPU is missing
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIZE = 1 << 30
REPEATS = 7


def framework_ops(name):
    """(available, to_gpu(a) -> g (complete when it returns), to_host(g) -> fresh numpy array)."""
    import numpy as np

    if name == "torch":
        import torch

        def to_gpu(a):
            g = torch.from_numpy(a).to("cuda")
            torch.cuda.synchronize()
            return g

        return torch.cuda.is_available, to_gpu, lambda g: g.cpu().numpy()
    if name == "cupy":
        import cupy as cp

        def to_gpu(a):
            g = cp.asarray(a)
            cp.cuda.Device().synchronize()
            return g

        return lambda: cp.cuda.runtime.getDeviceCount() > 0, to_gpu, lambda g: g.get()
    if name == "jax":
        import jax

        def to_gpu(a):
            return jax.device_put(a, jax.devices("gpu")[0]).block_until_ready()

        def has_gpu():
            try:
                return len(jax.devices("gpu")) > 0
            except RuntimeError:
                return False

        return has_gpu, to_gpu, lambda g: np.asarray(g)
    raise SystemExit(f"unknown framework {name}")


def child(name):
    import numpy as np

    _, to_gpu, to_host = framework_ops(name)
    a = np.random.default_rng(1).integers(0, 256, SIZE, dtype=np.uint8)
    times_h2d, times_d2h = [], []
    for i in range(REPEATS + 1):
        t0 = time.perf_counter()
        g = to_gpu(a)
        t1 = time.perf_counter()
        back = to_host(g)  # a fresh pageable array each time, as users get
        t2 = time.perf_counter()
        if i:  # the first round is the warm-up
            times_h2d.append(t1 - t0)
            times_d2h.append(t2 - t1)
        if not np.array_equal(back, a):
            print(f"{name}: wrong bytes after the round trip", file=sys.stderr)
            sys.exit(1)
        del g, back
    print(json.dumps({"h2d_s": times_h2d, "d2h_s": times_d2h}))


def summarize(results, size):
    """One mode's runs (each with its h2d_s/d2h_s times and cmt's statistics) as GB/s (median and
    spread) and what cmt took or forwarded. Also used by bench/entry_paths.py."""
    h2d = [x for r in results for x in r["h2d_s"]]
    d2h = [x for r in results for x in r["d2h_s"]]
    stats = [r["stats"] for r in results]
    return {
        "h2d_gbps": size / statistics.median(h2d) / 1e9,
        "d2h_gbps": size / statistics.median(d2h) / 1e9,
        "h2d_spread_gbps": [size / max(h2d) / 1e9, size / min(h2d) / 1e9],
        "d2h_spread_gbps": [size / max(d2h) / 1e9, size / min(d2h) / 1e9],
        "taken_calls": sum(s["taken"]["h2d"]["calls"] + s["taken"]["d2h"]["calls"] for s in stats),
        "taken_via": {k: sum(s["taken_via"][k] for s in stats) for k in ("runtime", "driver")},
        "forwarded": {k: sum(s["forwarded"][k] for s in stats) for k in stats[0]["forwarded"]},
    }


def run(cmt, name, with_cmt):
    stats = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    # JAX would otherwise reserve most of the GPU's memory at start.
    env = dict(os.environ, CMT_STATS=stats, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    cmd = [sys.executable, __file__, "--child", name]
    if with_cmt:
        cmd = [cmt, "run", "--"] + cmd
    else:
        env["CMT_DISABLE"] = "1"
        cmd = [cmt, "run", "--"] + cmd  # same launcher, engine switched off: the default path
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stdout, out.stderr, file=sys.stderr)
        sys.exit(1)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["stats"] = json.load(open(stats))
    os.unlink(stats)
    return result


def main():
    if "--child" in sys.argv:
        return child(sys.argv[sys.argv.index("--child") + 1])
    cmt, name = sys.argv[1], sys.argv[2]
    try:
        available, _, _ = framework_ops(name)
        if not available():
            raise ImportError("no GPU")
    except Exception as e:  # ImportError, or a framework that cannot find its CUDA libraries
        print(f"{name} skipped: {e}")
        sys.exit(77)
    rows = {}
    # Alternate runs: default, cmt, default, cmt, so drift hits both alike.
    runs = {"default": [], "cmt": []}
    for _ in range(2):
        runs["default"].append(run(cmt, name, False))
        runs["cmt"].append(run(cmt, name, True))
    for mode, results in runs.items():
        rows[mode] = summarize(results, SIZE)
    for run_name in ("default", "cmt"):
        r = rows[run_name]
        print(f"{name} {run_name:8s} to GPU {r['h2d_gbps']:6.1f} GB/s  to host {r['d2h_gbps']:6.1f} GB/s"
              f"  (copies taken by cmt: {r['taken_calls']}, via {r['taken_via']})")
    forwarded = {k: v for k, v in rows["cmt"]["forwarded"].items() if v}
    print(f"{name} forwarded by cmt: {forwarded or 'none'}")
    print(f"{name} ratio cmt/default: to GPU {rows['cmt']['h2d_gbps'] / rows['default']['h2d_gbps']:.2f}x"
          f"  to host {rows['cmt']['d2h_gbps'] / rows['default']['d2h_gbps']:.2f}x")
    if "--json" in sys.argv:
        json.dump(rows, open(sys.argv[sys.argv.index("--json") + 1], "w"), indent=2)
    if rows["default"]["taken_calls"] != 0:
        print("FAIL: the run with CMT_DISABLE=1 took copies")
        sys.exit(1)
    if "--require-taken" in sys.argv and rows["cmt"]["taken_calls"] == 0:
        print(f"FAIL: cmt took none of {name}'s copies")
        sys.exit(1)


if __name__ == "__main__":
    main()
