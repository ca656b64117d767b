#!/usr/bin/env python3
"""PyTorch under cmt: torch.from_numpy(a).to('cuda') and .cpu() of 1 GiB, bytes checked, with
and without cmt, each in its own process (cmt's statistics prove the copies were taken).

usage: gpu_torch_test.py CMT_EXECUTABLE [--json FILE]   exit 77 where torch or a GPU is missing
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


def child():
    import numpy as np
    import torch

    a = np.random.default_rng(1).integers(0, 256, SIZE, dtype=np.uint8)
    t = torch.from_numpy(a)
    times_h2d, times_d2h = [], []
    for i in range(REPEATS + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        g = t.to("cuda")
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        back = g.cpu()  # a fresh pageable tensor each time, as users get
        t2 = time.perf_counter()
        if i:  # the first round is the warm-up
            times_h2d.append(t1 - t0)
            times_d2h.append(t2 - t1)
        if not np.array_equal(back.numpy(), a):
            print("wrong bytes after .to('cuda').cpu()", file=sys.stderr)
            sys.exit(1)
        del g, back
    print(json.dumps({"h2d_s": times_h2d, "d2h_s": times_d2h}))


def run(cmt, with_cmt):
    stats = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    env = dict(os.environ, CMT_STATS=stats)
    cmd = [sys.executable, __file__, "--child"]
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
        return child()
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("no GPU")
    except ImportError as e:
        print(f"skipped: {e}")
        sys.exit(77)
    cmt = sys.argv[1]
    rows = {}
    # Alternate runs: default, cmt, default, cmt, so drift hits both alike.
    runs = {"default": [], "cmt": []}
    for _ in range(2):
        runs["default"].append(run(cmt, False))
        runs["cmt"].append(run(cmt, True))
    for name, results in runs.items():
        h2d = [x for r in results for x in r["h2d_s"]]
        d2h = [x for r in results for x in r["d2h_s"]]
        rows[name] = {
            "h2d_gbps": SIZE / statistics.median(h2d) / 1e9,
            "d2h_gbps": SIZE / statistics.median(d2h) / 1e9,
            "h2d_spread_gbps": [SIZE / max(h2d) / 1e9, SIZE / min(h2d) / 1e9],
            "d2h_spread_gbps": [SIZE / max(d2h) / 1e9, SIZE / min(d2h) / 1e9],
            "taken_calls": sum(r["stats"]["taken"]["h2d"]["calls"] + r["stats"]["taken"]["d2h"]["calls"]
                               for r in results),
        }
    ok = rows["cmt"]["taken_calls"] > 0 and rows["default"]["taken_calls"] == 0
    for name in ("default", "cmt"):
        r = rows[name]
        print(f"{name:8s} .to('cuda') {r['h2d_gbps']:6.1f} GB/s  .cpu() {r['d2h_gbps']:6.1f} GB/s"
              f"  (copies taken by cmt: {r['taken_calls']})")
    print(f"ratio cmt/default: .to('cuda') {rows['cmt']['h2d_gbps'] / rows['default']['h2d_gbps']:.2f}x"
          f"  .cpu() {rows['cmt']['d2h_gbps'] / rows['default']['d2h_gbps']:.2f}x")
    if "--json" in sys.argv:
        json.dump(rows, open(sys.argv[sys.argv.index("--json") + 1], "w"), indent=2)
    if not ok:
        print("FAIL: cmt took no copy (or the default run did)")
        sys.exit(1)


if __name__ == "__main__":
    main()
