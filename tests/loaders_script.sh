#!/bin/sh
# bench/workloads/loaders.py's own logic on a CPU machine, with stand-ins for torch and numpy
# (tests/data/standins): a child runs every copy scenario --reps times and checks its bytes, one
# whose "copy" changes a byte is caught, and the parent's summary and report read what children
# return. So a device call is not lost to a mistake in the script.
set -eu
src=$1
PYTHONPATH="$src/tests/data/standins" python3 - "$src/bench/workloads/loaders.py" <<'PY'
import importlib.util, os, sys, tempfile
path = sys.argv[1]
sys.argv = ["loaders.py", "--reps", "2"]
spec = importlib.util.spec_from_file_location("loaders", path)
L = importlib.util.module_from_spec(spec)
spec.loader.exec_module(L)
work = tempfile.mkdtemp()
blob, index, at = os.path.join(work, "b.bin"), [], 0
with open(blob, "wb") as f:
    for i in range(6):
        n = 4096 + 17 * i
        f.write(os.urandom(n))
        index.append((f"t{i}", at, n))
        at += n
os.environ["CMT_DISABLE"] = "1"
doc = L.child_copies(blob, index)
want = {f"{k}-{t}" for k in ("mapped", "resident", "pinned") for t in L.THREADS}
want |= {"gap-1ms", "pinned-gap-1ms"}
assert doc["check"] == "ok" and set(doc["gbps"]) == want, doc
assert all(len(v) == 2 for v in doc["reps_gbps"].values()), doc["reps_gbps"]
# A copy that changes a byte is caught.
import torch
good = torch._T.to
torch._T.to = lambda s, dev, non_blocking=False: torch._T(s.a[:-1] + bytes([s.a[-1] ^ 1]))
assert L.child_copies(blob, index)["check"] == "WRONG BYTES"
torch._T.to = good
# The parent's summary of two rounds of two modes, and its report.
del os.environ["CMT_DISABLE"]
cmt = L.child_copies(blob, index)
runs = {"default": [doc, doc], "cmt": [cmt, cmt]}
rows = L.summarize(runs, {"default": {}, "cmt": {}})
assert rows["mapped-8"]["cmt"]["vs_default"] > 0 and rows["mapped-8"]["cmt"]["vs_pinned"] > 0
L.report({"date": "d", "gpu": "g", "tensors": 6, "bytes": at, "rounds": 2, "reps": 2,
          "checks": ["ok"], "scenarios": rows})
print("ok: loaders.py's scenarios, their check and their summary")
PY
