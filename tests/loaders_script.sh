#!/bin/sh
# bench/workloads/loaders.py's own logic on a CPU machine, with stand-ins for torch and numpy
# (tests/data/standins): a child runs every copy scenario --reps times and checks its bytes, one
# whose "copy" changes a byte is caught, and the parent's summary and report read what children
# return; train_loop.py's parent with stand-in children; and bench/lab/load_bounds.py on a
# made-up trace of one loader call; and that every benchmark script refuses a misspelt flag. So a
# device call is not lost to a mistake in the script or its command line.
set -eu
src=$1
PYTHONPATH="$src/tests/data/standins" python3 - "$src/bench/workloads/loaders.py" <<'PY'
import importlib.util, os, sys, tempfile
path = sys.argv[1]
sys.argv = ["loaders.py", "--reps", "2"]
spec = importlib.util.spec_from_file_location("loaders", path)
L = importlib.util.module_from_spec(spec)
spec.loader.exec_module(L)
L.REPS = 2  # as main() sets it from --reps
# The command line: an unknown flag or a malformed --mode is refused, naming it.
import contextlib, io
for bad in (["cmt", "--only", "x"], ["cmt", "--mode", "nocolon"], [], ["cmt", "--hf", "--hf-only"]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            L.parse_args(bad)
            raise AssertionError(f"{bad} was accepted")
        except SystemExit as e:
            assert e.code == 2, (bad, e.code)
    assert "--only" in err.getvalue() or bad != ["cmt", "--only", "x"], err.getvalue()
a = L.parse_args(["cmt", "--rounds", "2", "--files-only", "--mode", "m:A=1,B=2", "--deadline", "9"])
assert (a.cmt, a.rounds, a.files_only, a.deadline) == ("cmt", 2, True, 9.0), a
assert L.modes_from(a.mode)["m"] == {"A": "1", "B": "2"}
c = L.parse_args(["--child", "copies", "b.bin", "b.json", "--reps", "1"])
assert c.child == ["copies", "b.bin", "b.json"] and c.reps == 1, c
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
# The files child's thread accounting: CPU this thread burns is seen (a thread that has ended
# by the second snapshot is not: the scenarios' copy threads live as long as the process).
before = L.thread_cpu()
t0 = L.time.thread_time()
while L.time.thread_time() - t0 < 0.1:
    pass
for _ in range(5):  # five sleeps: five voluntary switches at least
    L.time.sleep(0.001)
after = L.thread_cpu()
used = L.threads_during(before, after)
assert sum(sum(v) for v in used.values()) >= 0.03, used
assert sum(v[0] for v in L.switches_during(before, after).values()) >= 5, after
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
# A process far below the others is named in the report (a median and spread alone hid them).
slow = dict(cmt, gbps=dict(cmt["gbps"], **{"mapped-8": cmt["gbps"]["mapped-8"] / 4}))
rows = L.summarize({"default": [doc] * 3, "cmt": [cmt, cmt, slow]}, {"default": {}, "cmt": {}})
said = io.StringIO()
with contextlib.redirect_stdout(said):
    L.report({"date": "d", "gpu": "g", "tensors": 6, "bytes": at, "rounds": 3, "reps": 2,
              "checks": ["ok"], "scenarios": rows})
lines = {ln.split()[0]: ln for ln in said.getvalue().splitlines()[1:]}
assert f"low {slow['gbps']['mapped-8']:.1f}" in lines["mapped-8"], lines["mapped-8"]
assert "low" not in lines["mapped-1"], lines["mapped-1"]
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
# bench/workloads/processes.py's parent (its children need torch and a GPU): sets of processes in
# step through a stand-in launcher whose children speak the children's protocol, each way's
# figures, the rounds over modes and counts, a child's wrong bytes failing the run, and the
# command line.
python3 - "$src/bench/workloads/processes.py" <<'PY'
import contextlib, importlib.util, io, json, os, stat, sys, tempfile
path = sys.argv[1]
spec = importlib.util.spec_from_file_location("processes", path)
P = importlib.util.module_from_spec(spec)
spec.loader.exec_module(P)
work = tempfile.mkdtemp()
child = os.path.join(work, "child.py")
open(child, "w").write("""import json, os, sys, time
w = {}
for way in ("h2d", "d2h"):
    print(way + " ready", flush=True)
    sys.stdin.readline()
    t = time.monotonic()
    time.sleep(0.05 if os.environ.get("CMT_DISABLE") else 0.01)
    w[way] = {"start": t, "end": time.monotonic(), "cpu_s": 0.001, "bytes": 10**8}
print(json.dumps({"windows": w, "right": not os.environ.get("WRONG")}), flush=True)
""")
launcher = os.path.join(work, "cmt")
open(launcher, "w").write("#!/bin/sh\nexec %s %s\n" % (sys.executable, child))
os.chmod(launcher, stat.S_IRWXU)
reports = P.run_set(launcher, dict(os.environ), False, 3, 1)
assert len(reports) == 3 and all(r["right"] for r in reports), reports
f = P.figures(reports)
# Three processes' 0.3 GB over a span of 10 ms and more (the processes' starts apart on a loaded
# machine): at most 30 GB/s, and each process at most 10.
assert 1 < f["h2d"]["gbps"] <= 30 and 0.5 < f["d2h"]["slowest_gbps"] <= 10, f
for bad in ([], ["cmt", "--modes", "x"], ["cmt", "--mode", "nocolon"]):
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            P.parse_args(bad)
            raise AssertionError(f"{bad} was accepted")
        except SystemExit as e:
            assert e.code == 2, (bad, e.code)
P.machine_meta.meta = lambda cmt, argv: {"date": "d", "gpu": "g"}
out = os.path.join(work, "r.json")
sys.argv = ["processes.py", launcher, "--processes", "1,2", "--rounds", "2", "--mode",
            "other:X=1", "--json", out]
with contextlib.redirect_stdout(io.StringIO()) as said, contextlib.redirect_stderr(io.StringIO()):
    assert P.main() == 0
doc = json.load(open(out))
assert [r["processes"] for r in doc["results"]] == [1, 2], doc["results"]
row = doc["results"][1]
assert set(row) == {"processes", "default", "cmt", "other", "pinned"}, row
assert row["cmt"]["h2d"]["gbps"]["median"] > row["default"]["h2d"]["gbps"]["median"], row
import re
for n in (1, 2):
    for way in ("h2d", "d2h"):
        assert re.search(rf"  {n} x {way}: default [\d.]+ \[[\d.]+-[\d.]+\] cpu [\d.]+s/GB; "
                         rf"cmt [\d.]+ \[[\d.]+-[\d.]+\] [\d.]+x cpu", said.getvalue()), said.getvalue()
sys.argv += ["--mode", "bad:WRONG=1"]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
    assert P.main() == 1
assert "WRONG BYTES" in err.getvalue(), err.getvalue()
print("ok: processes.py's sets in step, figures, rounds and report")
PY
# bench/lab/load_bounds.py: a call of 10 us (two threads) holding a memcpy, two overlapping copies
# and a wait; what it would take with its copies free (the time no thread was in any of them) and
# at a 1 GB/s link (2 MB more: 2 ms), read from a version-6 trace and the report beside it.
python3 - "$src/bench/lab/load_bounds.py" <<'PY'
import importlib.util, json, os, subprocess, sys, tempfile
path = sys.argv[1]
spec = importlib.util.spec_from_file_location("load_bounds", path)
B = importlib.util.module_from_spec(spec)
spec.loader.exec_module(B)
work = tempfile.mkdtemp()
cols = ("start_ns end_ns tid api direction bytes taken_bytes outcome host stream result lane "
        "lane_built first_dma_ns lane_wait_ns host_at gpu_ns gpu_gap_ns").split()
def row(s, e, tid, api, d, b):
    return "\t".join([str(s), str(e), str(tid), api, d, str(b), str(b), "taken", "-", "0x0", "0",
                      "-1", "0", "-1", "-1", "0x0", "-1", "-1"])
lines = ["# cmt trace 6 pid=1 exe=x calls=5 dropped=0", "\t".join(cols),
         row(1000, 2000, 1, "memcpy", "h2h", 100),
         row(2500, 2600, 1, "cudaMemcpyAsync", "h2d", 10**6),
         row(2600, 3000, 1, "cudaStreamSynchronize", "wait", 0),
         row(2700, 3500, 2, "cudaMemcpyAsync", "h2d", 10**6),
         row(20000, 21000, 1, "cudaMemcpyAsync", "d2h", 5)]  # after the call: not its
trace = os.path.join(work, "t.tsv")
open(trace, "w").write("\n".join(lines) + "\n")
json.dump({"windows_ns": {"load": [500, 10500], "empty": [11000, 12000]}},
          open(os.path.join(work, "t.json"), "w"))
r = B.window_report(list(B.rows(trace)), 500, 10500, 1.0)
want = {"span_ms": 0.01, "calls": 4, "threads": 2, "before_ms": 0.0005, "after_ms": 0.007,
        "copy calls ms": 0.0009, "host leg ms": 0.001, "waits ms": 0.0004, "gpu_gb": 0.002,
        "no_copy_ms": 0.008, "bound_free_ms": 0.008, "bound_link_ms": 2.008}
assert all(abs(r[k] - v) < 1e-9 for k, v in want.items()), r
out = subprocess.run([sys.executable, path, trace, "--link", "1"], capture_output=True, text=True)
assert out.returncode == 0 and "no copy-related call inside" in out.stdout, out
assert "2.0  (2 thread(s))" in out.stdout, out.stdout
old = os.path.join(work, "old.tsv")
open(old, "w").write("\n".join(["# cmt trace 5 pid=1 exe=x calls=0 dropped=0"] + lines[1:2]) + "\n")
bad = subprocess.run([sys.executable, path, old, trace[:-4] + ".json"], capture_output=True,
                     text=True)
assert bad.returncode != 0 and "want 6" in bad.stderr, bad
print("ok: load_bounds.py's bounds of a loader call")
PY
# loaders.read_through_pinned (the read-pinned, fread-pinned and preadv-pinned scenarios, and each
# pass of bench/lab/read_loop.py) over a stand-in torch whose tensors are bytes in memory: every
# way of reading, a file of no whole number of chunks, buffers given or made, each read timed.
PYTHONPATH="$src/tests/data/standins" python3 - "$src/bench/workloads/loaders.py" <<'PY'
import ctypes, importlib.util, os, sys, tempfile
spec = importlib.util.spec_from_file_location("loaders", sys.argv[1])
L = importlib.util.module_from_spec(spec)
spec.loader.exec_module(L)

class T:  # a tensor: a writable view of bytes
    def __init__(s, mv): s.mv = mv
    def __getitem__(s, k): return T(s.mv[k])
    def copy_(s, other): s.mv[:] = other.mv
    def pin_memory(s): return s
    def numpy(s): return s.mv
    def data_ptr(s): return ctypes.addressof(ctypes.c_char.from_buffer(s.mv))

class FakeTorch:
    uint8 = "uint8"
    @staticmethod
    def empty(n, dtype=None, device=None): return T(memoryview(bytearray(n)))

path = os.path.join(tempfile.mkdtemp(), "f.bin")
data = os.urandom(3 * 65536 + 123)
open(path, "wb").write(data)
for how in ({}, {"use_fread": True}, {"use_preadv": True}):
    out = L.read_through_pinned(FakeTorch, path, 65536, **how)
    assert bytes(out.mv) == data, how
out, pinned, reads = FakeTorch.empty(len(data)), FakeTorch.empty(65536), []
got = L.read_through_pinned(FakeTorch, path, 65536, True, out=out, pinned=pinned,
                            read_seconds=reads)
assert got is out and bytes(out.mv) == data and len(reads) == 4, len(reads)  # the last one short
# Each copy timed after the setup, and the files child's summary of them.
reads, copies = [], []
out = L.read_through_pinned(FakeTorch, path, 65536, read_seconds=reads, copy_seconds=copies)
assert bytes(out.mv) == data and len(reads) == 4 and len(copies) == 5, (len(reads), len(copies))
st = L.staging_times(reads, copies)  # copies[0]: the setup, then one a read
assert st["setup_ms"] >= 0 and len(st["copy"]["top_ms"]) == 4 and len(st["copy_tenths_ms"]) == 10
assert abs(sum(st["copy_tenths_ms"]) - st["copy"]["sum_ms"]) < 0.05, st
print("ok: loaders.read_through_pinned reads every byte, each way")
PY
# The files child itself (child_files) over stand-ins for torch, numpy and safetensors whose tensors
# are bytes in memory: every scenario runs, its bytes check out, and it reports what the device
# calls read (each staging scenario's reads, copies and threads). A mistake here would cost a call.
python3 - "$src/bench/workloads/loaders.py" "$src/tests/data" <<'PY'
import importlib.util, sys
sys.path.insert(0, sys.argv[2])
import file_standins as S
blob, index, at = S.write_blob()
S.install(blob, index)
spec = importlib.util.spec_from_file_location("loaders", sys.argv[1])
L = importlib.util.module_from_spec(spec)
spec.loader.exec_module(L)
doc = L.child_files("unused.pt", blob, blob, index)
assert doc["check"] == "ok" and set(doc["gbps"]) == set(L.FILE_SCENARIOS), doc["check"]
staging = [s for s in L.FILE_SCENARIOS if "pinned" in s]
assert set(doc["read_s"]) == set(doc["staging"]) == set(staging), doc["staging"].keys()
st = doc["staging"]["read-pinned-1M"]  # 5 MiB and change: 6 reads into a 1 MiB buffer
assert len(st["copy"]["top_ms"]) == 5 and st["setup_ms"] is not None, st
assert set(doc["threads_cpu_s"]) == set(L.FILE_SCENARIOS), doc["threads_cpu_s"].keys()
print("ok: loaders.child_files runs every scenario and reports its reads, copies and threads")
PY
# Every benchmark script parses its flags with argparse: a misspelt flag or a bad value stops it
# with exit 2 and a message naming it, before any work (one ignored would cost a device call).
refuses() {  # SCRIPT (under bench/) EXPECTED-IN-MESSAGE ARGS...
  script=$1 want=$2; shift 2
  rc=0
  msg=$(python3 "$src/bench/$script" "$@" 2>&1) || rc=$?
  [ "$rc" = 2 ] || { echo "$script $*: exit $rc, not 2: $msg" >&2; exit 1; }
  case $msg in *"$want"*) ;; *) echo "$script $*: '$want' not in: $msg" >&2; exit 1 ;; esac
}
for s in workloads/loaders.py workloads/train_loop.py workloads/run_all.py workloads/offload.py \
    entry_paths.py lab/mapped_states.py; do
  refuses $s --onyl CMT --onyl x
done
refuses host_leg.py --onyl CMT BENCH --onyl x
refuses versus_concurrent.py --onyl --runs DIR --onyl x
refuses workloads/move_tensors.py --rounds --rounds x
refuses workloads/loaders.py "'nocolon'" CMT --mode nocolon
refuses workloads/train_loop.py "unknown scenario foo" CMT --only light,foo
refuses workloads/run_all.py "unknown workload bar" CMT --only bar
refuses workloads/offload.py "BASE one of" CMT --mode x:nobase
refuses workloads/offload.py "that name is taken" CMT --mode hot:pinned
refuses workloads/offload.py "CMT_KEY=VALUE" CMT --same-process --env FOO=1
refuses workloads/offload.py "unknown mode foo" CMT --modes hot,foo
refuses workloads/loaders.py "CMT, the cmt launcher, is required" --rounds 2
refuses host_leg.py "unknown part x" CMT BENCH --parts fill,x
refuses versus_concurrent.py "unknown config zz" A B --rounds 1 --out DIR --only zz
refuses versus_concurrent.py "are required" A B --rounds 1
echo "ok: the benchmark scripts refuse unknown flags and bad values, naming them"
