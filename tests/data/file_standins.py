# Stand-ins for torch, numpy and safetensors whose tensors are bytes in memory, for the scripts
# that run a benchmark's file child on a machine without them or a GPU (tests/loaders_script.sh,
# tests/mapped_states_script.sh): each "copy" a copy of the bytes, so a child's byte check means
# what it says. install() puts them in sys.modules before the benchmark module is loaded.
import ctypes
import json
import os
import sys
import tempfile
import types


class T:  # a tensor: a writable view of bytes
    def __init__(s, mv): s.mv = mv if isinstance(mv, memoryview) else memoryview(bytearray(mv))
    def __getitem__(s, k): return T(s.mv[k])
    def copy_(s, other, non_blocking=False): s.mv[:] = other.mv
    def pin_memory(s): return s
    def numpy(s): return s.mv
    def numel(s): return len(s.mv)
    def to(s, device): return T(bytes(s.mv))
    def cpu(s): return T(bytes(s.mv))
    def data_ptr(s): return ctypes.addressof(ctypes.c_char.from_buffer(s.mv))


class A:  # an array: bytes
    def __init__(s, n, v=0): s.b, s.size = bytearray([v]) * n, n


def write_blob(count=5):
    """A file of `count` tensors of odd sizes (1 MiB and change each), their index beside it
    (PATH.json): (path, [(name, offset, bytes)], total bytes)."""
    blob, index, at = os.path.join(tempfile.mkdtemp(), "b.bin"), [], 0
    with open(blob, "wb") as f:
        for i in range(count):
            n = (1 << 20) + 4096 * i + 7
            f.write(os.urandom(n))
            index.append((f"t{i}", at, n))
            at += n
    json.dump(index, open(blob + ".json", "w"))
    return blob, index, at


def install(blob, index):
    """torch, numpy, safetensors and safetensors.torch whose loaders all give the blob's tensors."""
    def tensors():
        data = open(blob, "rb").read()
        return {k: T(data[a:a + n]) for k, a, n in index}
    torch = types.ModuleType("torch")
    torch.uint8 = "uint8"
    torch.zeros = lambda n, device=None: T(bytes(n))
    torch.ones = lambda n, dtype=None: T(b"\1" * n)
    torch.empty = lambda n, dtype=None, device=None: T(bytearray(n))
    torch.empty_like = lambda t, device=None: T(bytearray(t.numel()))
    torch.from_numpy = lambda b: T(b)
    torch.frombuffer = lambda b, dtype=None: T(b)
    torch.equal = lambda x, y: bytes(x.mv) == bytes(y.mv)
    torch.load = lambda path, **kw: tensors()
    torch.cuda = types.SimpleNamespace(synchronize=lambda: None, empty_cache=lambda: None)
    numpy = types.ModuleType("numpy")
    numpy.uint8 = "uint8"

    def fromfile(path, dtype=None, count=0, offset=0):
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(count)

    def copyto(d, s): d.b[:] = s.b
    numpy.fromfile = fromfile
    numpy.ones = lambda n, dtype=None: A(n, 1)
    numpy.empty = lambda n, dtype=None: A(n)
    numpy.copyto = copyto

    class safe_open:
        def __init__(s, path, framework=None, device=None): s.t = tensors()
        def __enter__(s): return s
        def __exit__(s, *a): return False
        def get_tensor(s, k): return s.t[k]
    safetensors = types.ModuleType("safetensors")
    safetensors.safe_open = safe_open
    safetensors.torch = types.ModuleType("safetensors.torch")
    safetensors.torch.load_file = lambda path, device=None: tensors()
    sys.modules.update({"torch": torch, "numpy": numpy, "safetensors": safetensors,
                        "safetensors.torch": safetensors.torch})
