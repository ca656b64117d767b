# A stand-in for torch (tests/loaders_script.sh): enough of it for loaders.py's copy scenarios to run
# on a machine without torch or a GPU, each "copy" a copy of the bytes.
import contextlib
class _T:
    def __init__(s, a): s.a = bytes(a)
    def to(s, dev, non_blocking=False): return _T(s.a)
    def cpu(s): return s
    def numel(s): return len(s.a)
    def pin_memory(s): return _T(s.a)
def from_numpy(a): return _T(a)
def equal(x, y): return x.a == y.a
def zeros(n, device=None): return _T(b"\0" * n)
class cuda:
    @staticmethod
    def init(): pass
    @staticmethod
    def synchronize(): pass
    class Stream:
        def synchronize(s): pass
    @staticmethod
    def stream(s): return contextlib.nullcontext()
