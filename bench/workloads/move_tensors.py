#!/usr/bin/env python3
"""A small PyTorch job that moves tensors between pageable host memory and the GPU, the way a
training or inference loop does: a batch of medium tensors and a few large ones to the GPU, and
results back, a few rounds; every byte checked. Used by `cmt tune -- python3 ...` to tune for a
real mix, and as a workload on its own.

usage: move_tensors.py [--rounds N]   exit 77 where torch or a GPU is missing
"""
import argparse
import sys
import time


def main():
    p = argparse.ArgumentParser(prog="move_tensors.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    try:
        import numpy as np
        import torch
        if not torch.cuda.is_available():
            raise ImportError("no GPU")
    except ImportError as e:
        print(f"skipped: {e}")
        sys.exit(77)
    rounds = args.rounds
    rng = np.random.default_rng(3)
    # 48 x 8 MiB (a batch of activations or layers) and 3 x 256 MiB (embeddings, big weights).
    sizes = [8 << 20] * 48 + [256 << 20] * 3
    host = [torch.from_numpy(rng.integers(0, 256, n, dtype=np.uint8)) for n in sizes]
    t0 = time.perf_counter()
    for _ in range(rounds):
        on_gpu = [t.to("cuda", non_blocking=False) for t in host]
        back = [g.cpu() for g in on_gpu]
        for a, b in zip(host, back):
            if not torch.equal(a, b):
                print("wrong bytes", file=sys.stderr)
                sys.exit(1)
        del on_gpu, back
    torch.cuda.synchronize()
    moved = 2 * rounds * sum(sizes)
    print(f"moved {moved / 2**30:.1f} GiB in {time.perf_counter() - t0:.2f} s, bytes checked")


if __name__ == "__main__":
    main()
