#!/usr/bin/env python3
"""A PyTorch DataLoader with fork workers under `cmt run`: the main process has already moved
tensors through cmt (its engine and copy threads run) when it forks the workers; the workers make
batches on the CPU, and the main process moves each to the GPU and back. Nothing may hang (each run
is under a timeout), every value must be right, and cmt must have taken the main process's copies.
Before the workers, the main process also forks a child that ends with C's exit() (so its atexit
handlers run, cmt's among them, as in a child ending with sys.exit): with CMT_STATS per pid, only
the main process may write statistics with copies in them (before session 33 a forked child wrote
the parent's counts again, and `cmt run -v` summed them twice; now one that made no copy call
writes none).

usage: gpu_dataloader_test.py CMT_EXECUTABLE      exit 77 where torch or a GPU is missing
"""
import json
import os
import subprocess
import sys
import tempfile


def child():
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Batches(Dataset):
        def __len__(self):
            return 24

        def __getitem__(self, i):
            # 8 MiB per item, made in the worker with memset-like fills and copies of its own.
            return torch.full((2 << 20,), float(i)) + torch.arange(2 << 20, dtype=torch.float32) * 0

    # The engine starts before the fork: 64 MiB each way through cmt.
    warm = torch.arange(16 << 20, dtype=torch.float32)
    assert torch.equal(warm.to("cuda").cpu(), warm)
    print(f"pid {os.getpid()}", flush=True)
    pid = os.fork()
    if pid == 0:  # no CUDA here: a child of a process that used it cannot
        import ctypes
        ctypes.CDLL(None).exit(0)  # C's exit: cmt's atexit handlers run, Python's finalization not
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    loader = DataLoader(Batches(), batch_size=4, num_workers=2, multiprocessing_context="fork")
    seen = 0
    for batch in loader:
        g = batch.to("cuda")
        expect = batch[:, 0].double().sum().item() * (2 << 20)
        assert abs(g.double().sum().item() - expect) < 1e-3 * max(1.0, expect), "wrong sum on the GPU"
        assert torch.equal(g.cpu(), batch), "wrong bytes back from the GPU"
        seen += batch.shape[0]
    assert seen == 24, seen
    print("ok: 24 items through 2 fork workers, each moved to the GPU and back")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child()
        return 0
    cmt = sys.argv[1]
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError
    except ImportError:
        print("no torch or no GPU: skipped")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CMT_STATS=os.path.join(tmp, "stats.%p.json"))
        try:
            proc = subprocess.run([cmt, "run", "--", sys.executable, os.path.abspath(__file__), "--child"],
                                  env=env, capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            print("FAIL: the DataLoader run hung under cmt (180 s)")
            return 1
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            sys.stdout.write(proc.stderr[-3000:])
            print(f"FAIL: exited {proc.returncode}")
            return 1
        main_pid = proc.stdout.split("pid ", 1)[1].split()[0]
        taken = {}
        for name in os.listdir(tmp):
            s = json.load(open(os.path.join(tmp, name)))
            taken[name.split(".")[1]] = s["taken"]["h2d"]["calls"] + s["taken"]["d2h"]["calls"]
        print(f"copies cmt took, by process: {taken} (the main process: {main_pid})")
        if taken.get(main_pid, 0) == 0:
            print("FAIL: cmt took no copy in the main process")
            return 1
        if any(n for p, n in taken.items() if p != main_pid):
            print("FAIL: another process's statistics counted the main process's copies")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
