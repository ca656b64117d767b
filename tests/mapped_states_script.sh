#!/bin/sh
# bench/lab/mapped_states.py's child on a CPU machine, with stand-ins for torch, numpy and
# safetensors whose tensors are bytes in memory: each iteration times both loaders, reads what the
# scheduler says of them and their file mappings, runs the probes, and checks the bytes (a copy
# that changes one is caught); the parent's line reads what the child returns; an unknown flag is
# refused. So a device call is not lost to a mistake in the script.
set -eu
src=$1
python3 - "$src/bench/lab/mapped_states.py" <<'PY'
import contextlib, importlib.util, io, json, os, sys, tempfile, types

class T:  # a tensor: a writable view of bytes
    def __init__(s, mv): s.mv = mv if isinstance(mv, memoryview) else memoryview(bytearray(mv))
    def copy_(s, other, non_blocking=False): s.mv[:] = other.mv
    def pin_memory(s): return s
    def numel(s): return len(s.mv)
    def to(s, device): return T(bytes(s.mv))
    def cpu(s): return T(bytes(s.mv))

class A:  # an array: bytes
    def __init__(s, n, v=0): s.b, s.size = bytearray([v]) * n, n

work = tempfile.mkdtemp()
blob, index, at = os.path.join(work, "b.bin"), [], 0
with open(blob, "wb") as f:
    for i in range(5):
        n = (1 << 20) + 4096 * i + 7
        f.write(os.urandom(n))
        index.append((f"t{i}", at, n))
        at += n
json.dump(index, open(blob + ".json", "w"))
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
torch.equal = lambda x, y: bytes(x.mv) == bytes(y.mv)
torch.load = lambda path, **kw: tensors()
torch.cuda = types.SimpleNamespace(synchronize=lambda: None)
numpy = types.ModuleType("numpy")
numpy.uint8 = "uint8"
def fromfile(path, dtype=None, count=0, offset=0):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(count)
numpy.fromfile = fromfile
numpy.ones = lambda n, dtype=None: A(n, 1)
numpy.empty = lambda n, dtype=None: A(n)
def copyto(d, s): d.b[:] = s.b
numpy.copyto = copyto
class safe_open:
    def __init__(s, path, framework=None, device=None): s.t = tensors()
    def __enter__(s): return s
    def __exit__(s, *a): return False
    def get_tensor(s, k): return s.t[k]
safetensors = types.ModuleType("safetensors")
safetensors.safe_open = safe_open
sys.modules.update({"torch": torch, "numpy": numpy, "safetensors": safetensors})
spec = importlib.util.spec_from_file_location("mapped_states", sys.argv[1])
M = importlib.util.module_from_spec(spec)
spec.loader.exec_module(M)
M.PROBE_MT_BYTES = M.PROBE_1T_BYTES = 1 << 20

def child():
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        M.child(blob, blob, blob, blob + ".json", 2)
    return json.loads(said.getvalue().splitlines()[-1])
doc = child()
assert doc["check"] == "ok" and len(doc["rows"]) == 2, doc["check"]
for row in doc["rows"]:
    for k in ("mmap", "safe", "pinned", "cpu_mt", "cpu_1t"):
        assert row[k] > 0, (k, row)
    for k in ("mmap", "safe"):
        assert set(row[k + "_sched"]) == {"main_run_ms", "main_wait_ms", "copy_run_ms",
                                         "copy_wait_ms", "steal_ms"}, row[k + "_sched"]
        assert row[k + "_window_ns"][1] >= row[k + "_window_ns"][0]
        assert isinstance(row[k + "_maps"], list)
assert doc["threads"] and doc["threads"][0][1] >= 0, doc["threads"]
assert "mmap" in M.line("cmt", dict(doc, round=0)) and "ok" in M.line("cmt", doc)
# A copy that changes a byte is caught.
T.to = lambda s, device: T(bytes(s.mv[:-1]) + bytes([s.mv[-1] ^ 1]))
assert child()["check"] == "WRONG BYTES"
print("ok: mapped_states.py's child times, probes and checks each load")
PY
if python3 "$src/bench/lab/mapped_states.py" cmt --bogus >/dev/null 2>&1; then
  echo "mapped_states.py took an unknown flag" >&2
  exit 1
fi
echo "ok: mapped_states.py refuses an unknown flag"
