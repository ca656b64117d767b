#!/bin/sh
# bench/workloads/loaders.py's own logic on a CPU machine, with stand-ins for torch and numpy
# (tests/data/standins): a child runs every copy scenario --reps times and checks its bytes, one
# whose "copy" changes a byte is caught, and the parent's summary and report read what children
# return; and train_loop.py's parent with stand-in children. So a device call is not lost to a
# mistake in the script.
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
# bench/workloads/train_loop.py's parent (its children need torch and a GPU): the rounds with
# stand-in children, --deadline, the summary against default, and the report.
python3 - "$src/bench/workloads/train_loop.py" <<'PY'
import importlib.util, sys
path = sys.argv[1]
sys.argv = ["train_loop.py", "CMT", "--rounds", "3", "--json", "/dev/null"]
spec = importlib.util.spec_from_file_location("train_loop", path)
T = importlib.util.module_from_spec(spec)
spec.loader.exec_module(T)
calls = []
def fake_child(cmt, env, args):
    calls.append(env)
    slow = 2.0 if env.get("CMT_DISABLE") else 1.0
    return {"ms": {s: 10.0 * slow for s in T.SCENARIOS}, "check": "ok",
            "cpu_s_per_step": {s: (None if s == "loader-only" else 0.01) for s in T.SCENARIOS}}
T.run_child = fake_child
T.machine_meta.meta = lambda cmt, argv: {"date": "d", "gpu": "g"}
assert T.main() == 0 and len(calls) == 6, calls
rows = T.summarize({"default": [fake_child(None, {"CMT_DISABLE": "1"}, [])] * 2,
                    "cmt": [fake_child(None, {}, [])] * 2})
assert abs(rows["light"]["cmt"]["vs_default"] - 2.0) < 1e-9, rows["light"]
assert rows["loader-only"]["cmt"]["cpu_s_per_step"] is None
# --deadline: no round starts once the longest so far would end past it.
calls.clear()
sys.argv = ["train_loop.py", "CMT", "--rounds", "5", "--deadline", "0.000001"]
assert T.main() == 0 and len(calls) == 2, len(calls)
print("ok: train_loop.py's rounds, deadline, summary and report")
PY
