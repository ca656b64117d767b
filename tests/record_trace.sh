#!/bin/bash
# `cmt run --record FILE` on a CPU machine: the fake-driver program (fake_libcuda_engine.cpp)
# makes random driver-API round trips through cmt's engine, in two processes of one tree. The
# trace holds both processes; the bytes it says cmt took, per process, are exactly those of cmt's
# own statistics (CUDA copies, and the host leg's memcpy/memset); every call ends after it starts;
# and `cmt trace show` summarizes it. The statistics' time in flight is never more than the
# copies' times added up; the CUDA copies are timed on their streams; the program's
# cuStreamSynchronize calls are kept as waits (version 6). Then a process that forks a
# child ending with exit() (which runs the child's atexit handlers, cmt's among them) after
# copying host memory only: the parent's trace and statistics hold all its copies, and the child,
# which used no CUDA, writes neither, nor an exit summary (before, it wrote the parent's calls to
# the parent's trace file, replacing it or being replaced, and a statistics file counting the
# parent's copies a second time in `cmt run -v`'s sum).
set -u
cmt=$1
lib=$2
app=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CMT_FAKE_CUDA= CMT_LIBRARY=$lib CMT_STATS="$tmp/stats.%p.json" CMT_LOG=error \
  "$cmt" run --record "$tmp/trace.tsv" -- bash -c "'$app' 3 12 5 && '$app' 2 10 9" > "$tmp/out" 2> "$tmp/err" ||
  { echo "FAIL: the program under cmt run --record"; cat "$tmp/out" "$tmp/err"; exit 1; }
grep -q "the copies of 2 process(es) recorded in $tmp/trace.tsv" "$tmp/err" ||
  { echo "FAIL: cmt run said: $(cat "$tmp/err")"; exit 1; }
"$cmt" trace show "$tmp/trace.tsv" > "$tmp/show" || { echo "FAIL: cmt trace show"; exit 1; }
cat "$tmp/show"
grep -q "^trace: 2 process(es)" "$tmp/show" && grep -q "^taken by cmt: " "$tmp/show" &&
  grep -q "^waits for the GPU (synchronize calls): [1-9][0-9]* calls, cuStreamSynchronize " "$tmp/show" &&
  grep -q "^host buffers copied again " "$tmp/show" ||
  { echo "FAIL: the summary"; exit 1; }
python3 - "$tmp" <<'PY' || exit 1
import glob, json, sys
tmp = sys.argv[1]
sections = {}
pid = None
for line in open(f"{tmp}/trace.tsv"):
    if line.startswith("# cmt trace 6 "):
        pid = line.split("pid=")[1].split()[0]
        sections[pid] = []
    elif not line.startswith("start_ns"):
        f = line.rstrip("\n").split("\t")
        sections[pid].append(f)
assert len(sections) == 2, sections.keys()
for pid, rows in sections.items():
    s = json.load(open(f"{tmp}/stats.{pid}.json"))
    cuda = sum(int(r[6]) for r in rows if r[3].startswith("cu"))
    host = sum(int(r[6]) for r in rows if r[3] in ("memcpy", "memset"))
    want_cuda = s["taken"]["h2d"]["bytes"] + s["taken"]["d2h"]["bytes"] + s["taken"]["gpu_to_gpu"]["bytes"]
    hc = s["host_copies"]
    want_host = hc["bytes"] + hc["fills"]["bytes"]
    assert all(int(r[1]) >= int(r[0]) for r in rows), "a call ends before it starts"
    assert all(int(r[6]) <= int(r[5]) for r in rows), "more taken than asked"
    assert cuda == want_cuda and cuda > 0, f"pid {pid}: trace says cmt took {cuda} bytes of CUDA copies, statistics {want_cuda}"
    assert host == want_host, f"pid {pid}: trace says the host leg took {host} bytes, statistics {want_host}"
    taken = [r for r in rows if r[3].startswith("cu") and int(r[6]) > 0]
    assert taken and all(int(r[11]) >= 0 and int(r[13]) >= 0 for r in taken), "a taken copy without its lane or first DMA"
    assert all(int(r[11]) == -1 for r in rows if int(r[6]) == 0), "a lane for a copy cmt did not take"
    # Where each copy's host side was (version 4): an address for every host <-> device copy of
    # the driver API's, none for the host leg's calls.
    assert all(len(r) == 18 for r in rows), "a call line without host_at, gpu_ns and gpu_gap_ns"
    # A copy that named its direction, or that cmt took (cuMemcpy*, the host side found), says
    # where its host side was; a batch of several copies does not.
    assert all(int(r[15], 16) != 0 for r in rows if r[4] in ("h2d", "d2h") and r[3].startswith("cu")
               and "Batch" not in r[3] and (r[8] != "-" or int(r[6]) > 0)), \
        "a host <-> device copy without its host address: " + str([r for r in rows if r[4] in ("h2d", "d2h") and int(r[15], 16) == 0][:3])
    assert all(int(r[15], 16) == 0 for r in rows if r[4] == "h2h"), "a host address for a host-leg call"
    # Each CUDA copy timed on its stream (version 5), all but those the GPU had not yet run at
    # exit; its stream's other work since the copy before, where there was one; the host leg's
    # calls are not on a stream.
    # The program's cuStreamSynchronize calls (version 6): kept as waits, with no bytes, not
    # timed on a stream, and apart from the copies below.
    waits = [r for r in rows if r[4] == "wait"]
    assert waits and all(r[3] == "cuStreamSynchronize" and r[5] == r[6] == "0" and r[7] == "wait"
                         and int(r[16]) == int(r[17]) == -1 for r in waits), f"the waits: {waits[:3]}"
    cu = [r for r in rows if r[3].startswith("cu") and r[4] != "wait"]
    timed = [r for r in cu if int(r[16]) >= 0]
    assert len(timed) >= len(cu) * 3 // 4 and all(int(r[16]) < 60e9 for r in timed), \
        f"{len(timed)} of {len(cu)} CUDA copies timed on their streams"
    assert any(int(r[17]) >= 0 for r in cu), "no stream gap between copies"
    assert all(int(r[16]) == -1 and int(r[17]) == -1 for r in rows if not r[3].startswith("cu")), "a host-leg call timed on a stream"
    for d in ("h2d", "d2h"):
        t = s["taken"][d]
        assert t["in_flight_seconds"] <= t["seconds"] + 1e-6, t
    print(f"pid {pid}: {len(rows)} calls ({len(waits)} waits); cmt took {cuda} bytes of CUDA copies and {host} of host copies, as its statistics say")
PY
echo "ok: the trace of a process tree, true to cmt's statistics"
rm -f "$tmp"/stats.*.json
CMT_FAKE_CUDA= CMT_LIBRARY=$lib CMT_STATS="$tmp/stats.%p.json" CMT_LOG=info \
  "$cmt" run --record "$tmp/fork.tsv" -- "$app" 2 4 5 fork > "$tmp/out" 2> "$tmp/err" ||
  { echo "FAIL: the forking program under cmt run --record"; cat "$tmp/out" "$tmp/err"; exit 1; }
n=$(grep -c "at exit: " "$tmp/err")
[ "$n" -eq 1 ] || { echo "FAIL: $n exit summaries, want the parent's alone"; grep "at exit: " "$tmp/err"; exit 1; }
python3 - "$tmp" <<'PY' || exit 1
import glob, json, os, sys
tmp = sys.argv[1]
sections, pid = {}, None
for line in open(f"{tmp}/fork.tsv"):
    if line.startswith("# cmt trace 6 "):
        pid = line.split("pid=")[1].split()[0]
        sections[pid] = []
    elif not line.startswith("start_ns"):
        sections[pid].append(line.rstrip("\n").split("\t"))
stats = {os.path.basename(f).split(".")[1]: json.load(open(f)) for f in glob.glob(f"{tmp}/stats.*.json")}
assert len(stats) == 1, f"{len(stats)} statistics files, want the parent's alone: {sorted(stats)}"
assert set(sections) == set(stats), f"trace sections {sorted(sections)}, statistics {sorted(stats)}"
parent, s = next(iter(stats.items()))
taken = s["taken"]["h2d"]["calls"] + s["taken"]["d2h"]["calls"]
cuda = sum(int(r[6]) for r in sections[parent] if r[3].startswith("cu"))
assert taken > 0 and cuda == s["taken"]["h2d"]["bytes"] + s["taken"]["d2h"]["bytes"], "the parent's trace"
print(f"fork: parent {parent} {len(sections[parent])} calls, {taken} copies taken; the child wrote nothing")
PY
echo "ok: a forked child that used no CUDA writes no trace or statistics, the parent's whole"
