#!/bin/sh
# bench/lab/mapped_states.py's child on a CPU machine, with stand-ins for torch, numpy and
# safetensors whose tensors are bytes in memory: each iteration times both loaders, reads what the
# scheduler says of them and their file mappings, runs the probes, and checks the bytes (a copy
# that changes one is caught); the parent's line reads what the child returns (loaders_script.sh
# checks that it refuses an unknown flag). So a device call is not lost to a mistake in the script.
set -eu
src=$1
python3 - "$src/bench/lab/mapped_states.py" "$src/tests/data" <<'PY'
import contextlib, importlib.util, io, json, sys
sys.path.insert(0, sys.argv[2])
import file_standins as S
from file_standins import T
blob, index, at = S.write_blob()
S.install(blob, index)
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
