#!/usr/bin/env python3
"""Hot buffers' safety suite in Python (issue 33): tests/hot_safety_app.cpp's randomized program
with the host memory real Python programs copy from: numpy arrays (glibc's heap and mmap'd
chunks), PyTorch CPU tensors (c10's allocator), bytearrays, views into the middle of a larger
array, arrays made on another thread (another arena), anonymous mmap objects, all freed and made
again (often at the same address), resized (numpy's realloc), advised away (madvise DONTNEED), trimmed
(malloc_trim), forked (the child writes its copy), with Python's small-object arenas churned in
between. Every copy goes through torch (cudaMemcpyAsync and a stream synchronize, as .to('cuda')
and .copy_() make it) and every copied byte is checked:
  host to device: the array copied into a device tensor, then overwritten at once (a pageable
    copy's caller may), and the device's bytes read back through pinned memory: they must be the
    bytes at the call;
  device to host: known bytes (put on the device from pinned memory) copied into the array: they
    must all be there when the call returns.
Run under `cmt run` with CMT_REGISTER=hot, so that buffers copied again and again are registered.
Prints "ops N copies C wrong_bytes W" (as hot_safety_app does) and exits 1 if any byte was wrong.

usage: hot_safety_torch.py OPS SEED [--self-register]
  --self-register: the program registers each mmap buffer itself (cudaHostRegister) and never
  unregisters it before closing it: the danger cmt must avoid, so a run shows the check can fail.
"""
import ctypes
import gc
import mmap
import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor

try:
    import numpy as np
    import torch
except ImportError as e:  # no torch here: skipped, as without a GPU
    print(f"hot_safety_torch.py: {e}: skipped", file=sys.stderr)
    sys.exit(77)

KIB, MIB = 1 << 10, 1 << 20
SIZES = [64 * KIB, 100_000, 256 * KIB, 1 * MIB, 3_000_001, 4 * MIB, 16 * MIB]
BIG = 40 * MIB  # above glibc's largest mmap threshold: free() unmaps it inside libc
KINDS = ["numpy", "torch", "bytearray", "view", "thread", "mmap"]
SLOTS = 6


class Slot:
    """One host buffer: `array` is its uint8 view; the rest keeps its memory alive."""

    def __init__(self, kind, array, owner=None):
        self.kind, self.array, self.owner = kind, array, owner


class Program:
    def __init__(self, seed, self_register):
        self.rng = random.Random(seed)
        self.self_register = self_register
        # One pattern source; a fill is a slice of it at a random start.
        self.patterns = np.random.default_rng(seed).integers(0, 256, BIG + 8192, dtype=np.uint8)
        self.device = torch.empty(BIG, dtype=torch.uint8, device="cuda")
        # Pinned: cmt never takes copies to or from it, so the check does not lean on cmt.
        self.pinned = torch.empty(BIG, dtype=torch.uint8, pin_memory=True)
        self.pinned_np = self.pinned.numpy()
        self.libc = ctypes.CDLL(None)
        self.pool = ThreadPoolExecutor(1)
        self.ops = self.copies = self.wrong = 0
        self.slots = [self.make() for _ in range(SLOTS)]

    def pattern(self, n):
        start = self.rng.randrange(8192)
        return self.patterns[start:start + n]

    def size(self):
        return BIG if self.rng.random() < 0.04 else self.rng.choice(SIZES)

    def make(self, kind=None, n=None):
        n = n or self.size()
        kind = "mmap" if self.self_register else kind or self.rng.choice(KINDS)
        if kind == "numpy":
            slot = Slot(kind, np.empty(n, np.uint8))
        elif kind == "torch":
            tensor = torch.empty(n, dtype=torch.uint8)
            slot = Slot(kind, tensor.numpy(), tensor)
        elif kind == "bytearray":
            buffer = bytearray(n)
            slot = Slot(kind, np.frombuffer(buffer, np.uint8), buffer)
        elif kind == "view":
            start = self.rng.randrange(1, 8192)
            whole = np.empty(n + start + self.rng.randrange(8192), np.uint8)
            slot = Slot(kind, whole[start:start + n], whole)
        elif kind == "thread":
            slot = Slot(kind, self.pool.submit(np.empty, n, np.uint8).result())
        else:
            m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE)  # as malloc's: advised pages read 0
            slot = Slot(kind, np.frombuffer(m, np.uint8), m)
            if self.self_register:
                torch.cuda.cudart().cudaHostRegister(slot.array.ctypes.data, n, 0)
        slot.array[:] = self.pattern(n)
        return slot

    def release(self, slot):
        if slot.kind == "mmap":
            m = slot.owner
            slot.array = slot.owner = None
            try:
                m.close()  # munmap (with --self-register, deliberately never unregistered)
            except BufferError:  # a view of it still alive somewhere: collected, then closed
                gc.collect()
                m.close()
        slot.array = slot.owner = None

    def span(self, slot):
        n, r = len(slot.array), self.rng.random()
        if r < 0.6:
            return 0, n
        if r < 0.75:  # under cmt's 64 KiB threshold: copied beside a registration when it has one
            m = self.rng.randrange(1, min(n, 65536))
            lo = self.rng.randrange(n - m + 1)
            return lo, lo + m
        lo = self.rng.randrange(n - 1)
        return lo, lo + self.rng.randrange(1, n - lo + 1)

    def count_wrong(self, got, want):
        self.copies += 1
        wrong = int(np.count_nonzero(got != want))
        self.wrong += wrong
        if wrong:
            print(f"wrong bytes: {wrong} of {len(want)}", file=sys.stderr)

    def host_to_device(self, slot):
        lo, hi = self.span(slot)
        host = slot.array[lo:hi]
        expected = host.copy()
        self.device[:hi - lo].copy_(torch.from_numpy(host))
        host[:] = self.pattern(hi - lo)  # the caller may write it once the call returns
        self.pinned[:hi - lo].copy_(self.device[:hi - lo])
        self.count_wrong(self.pinned_np[:hi - lo], expected)

    def device_to_host(self, slot):
        lo, hi = self.span(slot)
        expected = self.pattern(hi - lo)
        self.pinned_np[:hi - lo] = expected
        self.device[:hi - lo].copy_(self.pinned[:hi - lo])
        torch.from_numpy(slot.array[lo:hi]).copy_(self.device[:hi - lo])
        self.count_wrong(slot.array[lo:hi], expected)

    def resize(self, i):
        slot, n = self.slots[i], self.size()
        if slot.kind != "numpy" or slot.array.base is not None:
            return
        slot.array.resize(n, refcheck=False)  # realloc, often in place
        slot.array[:] = self.pattern(n)

    def advise(self, slot):
        if slot.kind != "mmap":
            return
        slot.owner.madvise(mmap.MADV_DONTNEED)  # the pages read as zeros again
        self.count_wrong(slot.array[:4096], np.zeros(4096, np.uint8))
        slot.array[:] = self.pattern(len(slot.array))

    def fork(self, slot):
        pid = os.fork()
        if pid == 0:  # the child writes its copy of the buffer and leaves, no CUDA
            slot.array[:] = 0x5A
            os._exit(0)
        os.waitpid(pid, 0)

    def churn_small_objects(self):
        # Python's own arenas (mmap'd by obmalloc) made and given back.
        junk = [bytes(self.rng.randrange(1, 512)) for _ in range(50_000)]
        del junk
        gc.collect()

    def step(self):
        i = self.rng.randrange(SLOTS)
        slot, op = self.slots[i], self.rng.randrange(100)
        if op < 38:
            self.host_to_device(slot)
        elif op < 76:
            self.device_to_host(slot)
        elif op < 86:  # freed, then made again: the same size at the same address, often
            kind, n = slot.kind, len(slot.array)
            self.release(slot)
            self.slots[i] = self.make(kind if self.rng.random() < 0.7 else None,
                                      n if self.rng.random() < 0.7 else None)
        elif op < 90:
            self.resize(i)
        elif op < 93:
            self.advise(slot)
        elif op < 95:
            self.libc.malloc_trim(0)
        elif op < 97:
            self.fork(slot)
        else:
            self.churn_small_objects()
        self.ops += 1


def main():
    if len(sys.argv) < 3:
        print("usage: hot_safety_torch.py OPS SEED [--self-register]", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("no CUDA GPU: skipped", file=sys.stderr)
        return 77
    ops, seed = int(sys.argv[1]), int(sys.argv[2])
    program = None
    try:
        program = Program(seed, len(sys.argv) > 3 and sys.argv[3] == "--self-register")
        for _ in range(ops):
            program.step()
    except Exception as e:  # a broken run, told apart by its exit status unless a byte was wrong
        print(f"hot_safety_torch: {type(e).__name__}: {e}", file=sys.stderr)
        # Wrong bytes seen before the break are still wrong bytes: --self-register's stale
        # registrations also make a later cudaHostRegister or copy fail (invalid argument).
        if program and program.wrong:
            print(f"ops {program.ops} copies {program.copies} wrong_bytes {program.wrong} (then "
                  f"the run broke)")
            return 1
        return 3
    print(f"ops {program.ops} copies {program.copies} wrong_bytes {program.wrong}")
    return 1 if program.wrong else 0


if __name__ == "__main__":
    sys.exit(main())
