#!/bin/bash
# cmt end to end on a CPU machine: a program linked against the fake libcuda
# (fake_libcuda_engine.cpp) makes random driver-API round trips with libcmt.so preloaded, so the
# hooks, the interposer and the engine all run as on a GPU. First clean, where the engine must take
# the large copies; then with a fault injected at each kind of driver call, where every copy that
# reports success must still be byte-exact, the failures few, memory bounded, and nothing may hang
# (ctest's timeout) or crash.
set -u
lib=$1
app=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# run NAME FAULTS MAX_FAILED MUST_TAKE(1/0) [THREADS ROUNDS [peer]]
run() {
  local name=$1 faults=$2 max_failed=$3 must_take=$4 threads=${5:-4} rounds=${6:-60} mode=${7:-}
  local out=$tmp/$name.out
  CMT_FAKE_CUDA=$faults LD_PRELOAD=$lib CMT_STATS=$tmp/$name.json CMT_LOG=error \
    timeout 240 "$app" "$threads" "$rounds" 7 $mode > "$out" 2> "$tmp/$name.err"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL $name: the program failed (exit $rc)"; cat "$out"; head -20 "$tmp/$name.err"
    fails=$((fails + 1)); return
  fi
  python3 - "$name" "$out" "$tmp/$name.json" "$max_failed" "$must_take" "$faults" <<'PY' || fails=$((fails + 1))
import json, sys
name, out, stats, max_failed, must_take, fault = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1", sys.argv[6]
words = open(out).read().split()
r = {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2) if words[i + 1].lstrip("-").isdigit()}
s = json.load(open(stats))
taken = s["taken"]["h2d"]["calls"] + s["taken"]["d2h"]["calls"]
peer = s["taken"]["gpu_to_gpu"]["calls"]
batch = s["taken_via"]["batch"]
fwd = {k: v for k, v in s["forwarded"].items() if v}
line = f"{name}: {r['trips']} round trips, {r['ok']} ok, {r['failed']} failed, {r['wrong']} wrong; cmt took {taken} copies ({batch} in batches) and {peer} GPU-to-GPU, forwarded {fwd}; {r['dmas']} engine DMAs; max RSS {r['max_rss_mb']} MB"
ok = r["wrong"] == 0 and r["failed"] <= max_failed and r["max_rss_mb"] < 1024
ok = ok and (taken > 0 and r["dmas"] > 0 if must_take else True)
# Clean, every large pageable copy is the engine's: none forwarded for any other reason, except
# the few a loaded machine makes wait past the engine's 100 ms limit on a slot that another
# stream's DMA still holds (then CUDA makes the copy, by design), and small ones the warm gate
# leaves to CUDA while the copy threads sleep.
if name == "clean" and (set(fwd) - {"below_threshold", "pinned_or_managed", "engine_unavailable",
                                    "threads_asleep", "lanes_busy"}
                        or fwd.get("engine_unavailable", 0) * 10 > taken):
    ok = False
# A third of the round trips are batches (cuMemcpyBatchAsync): cmt takes their large copies too.
if name == "clean" and batch == 0:
    ok = False
# What the copy threads cost in CPU is written beside what cmt took, and is not nothing.
if name == "clean":
    ct = s.get("copy_threads", {})
    line += f"; copy threads {ct.get('cpu_seconds')} CPU s ({ct.get('cpu_seconds_per_gb')} s/GB)"
    if not (ct.get("cpu_seconds", 0) > 0 and ct.get("cpu_seconds_per_gb", 0) > 0):
        ok = False
# Two GPUs without peer access: every GPU-to-GPU copy from peer_threshold up goes through the host
# (a fifth of them, cuMemcpyAsync, reach the peer path through the unified hook). GPU 1's bytes
# are read back with GPU 0's context current: CUDA's (other_device).
if name == "peer_clean" and (peer == 0 or set(fwd) - {"below_threshold", "threads_asleep",
                                                      "lanes_busy", "engine_unavailable",
                                                      "other_device"}):
    ok = False
# The injected fault was reached: the calls it counts went past its index.
counter = {"dma_fail_at": "enqueues", "query_fail_at": "queries", "query_fail_from": "queries",
           "record_fail_at": "records"}
for item in filter(None, fault.split(",")):
    key, value = item.split("=")
    if counter.get(key) and r[counter[key]] <= int(value):
        ok = False
        line += f"; the fault {item} was never reached ({r[counter[key]]} {counter[key]})"
print(("ok   " if ok else "FAIL ") + line)
sys.exit(0 if ok else 1)
PY
}

# Clean: the engine takes the large copies, from several threads, sync and async, odd offsets.
run clean "" 0 1 4 80
# One DMA enqueue fails: the copy that met it reports the error; all others are right.
run dma_fail "dma_fail_at=40" 2 1
# One event query fails mid-copy, or one record: that copy fails at most, and the lane goes on.
run query_fail "query_fail_at=60" 2 1
run record_fail "record_fail_at=30" 2 1
# A staging slot's event never completes cleanly again: the lane breaks, is rebuilt a bounded
# number of times, then forwards; memory stays bounded (finding 17.6).
run queries_fail_for_good "query_fail_from=50" 8 1
# The engine cannot start (registering staging memory, or making events, fails): every copy is
# forwarded to the driver and succeeds.
run register_fails "host_register=2" 0 0
run events_fail "event_create=2" 0 0
# No current context: forwarded, as CUDA's own answer is the one the program must see.
run no_context "no_context=1" 0 0 2 20
# Two GPUs without peer access: host -> GPU 0 -> GPU 1 -> host by every GPU-to-GPU entry point,
# clean and with a DMA failing (the copy that meets it, through the host or the engine, stops at a
# piece and CUDA finishes it; which one depends on the threads' timing).
run peer_clean "devices=2" 0 1 4 60 peer
run peer_dma_fail "devices=2,dma_fail_at=60" 2 1 4 60 peer
# The primary context reset four times between rounds (cudaDeviceReset): each time cmt lets go of
# the lanes it had in it, and the rounds after build theirs anew and stay byte-exact.
run reset "" 0 1 2 30 reset
CMT_FAKE_CUDA= LD_PRELOAD=$lib CMT_LOG=info timeout 240 "$app" 1 20 9 reset > "$tmp/reset-log.out" \
  2> "$tmp/reset-log.err" || { echo "FAIL reset-log: exit $?"; fails=$((fails + 1)); }
ends=$(grep -c "ends (cuDevicePrimaryCtxReset_v2): cmt let go of 2 staging lanes" "$tmp/reset-log.err")
built=$(grep -c "lane ready" "$tmp/reset-log.err")
if [ "$ends" -eq 4 ] && [ "$built" -eq 10 ]; then
  echo "ok   reset: 4 context ends, each letting go of 2 lanes; 10 lanes built in all"
else
  echo "FAIL reset: $ends context ends letting go of 2 lanes (4 expected), $built lanes built (10)"
  grep -v "lane ready" "$tmp/reset-log.err" | head; fails=$((fails + 1))
fi

# An end a hook saw is not found again at the next copy (the watch forgot the handle).
if grep -q "did not see" "$tmp/reset-log.err"; then
  echo "FAIL reset: an end the hook saw was reported again as unseen"; fails=$((fails + 1))
fi

# The same ends made where no hook of cmt's sees them: cmt finds each at its next copy in the new
# context (its id is new), lets go of the old one's lanes untouched, and builds them anew.
run unseen "" 0 1 2 30 unseen
CMT_FAKE_CUDA= LD_PRELOAD=$lib CMT_LOG=info timeout 240 "$app" 1 20 9 unseen > "$tmp/unseen-log.out" \
  2> "$tmp/unseen-log.err" || { echo "FAIL unseen-log: exit $?"; fails=$((fails + 1)); }
ends=$(grep -c "ends (an end cmt did not see, found at a copy): cmt let go of 2 staging lanes" \
  "$tmp/unseen-log.err")
if [ "$ends" -eq 4 ]; then
  echo "ok   unseen: 4 context ends no hook saw, each found at the next copy, 2 lanes let go"
else
  echo "FAIL unseen: $ends unseen context ends letting go of 2 lanes (4 expected)"
  grep -v "lane ready" "$tmp/unseen-log.err" | head; fails=$((fails + 1))
fi

# Threads with a cancellation pending copy before anything else has reached cmt (the first one
# builds cmt's state): each copy returns whole, the thread is cancelled after it, and the
# process goes on (a cancellation acting inside cmt's frames ended it).
run cancel "" 0 1 2 20 cancel

# The same with two GPUs and peer rounds, resetting GPU 0's context and GPU 1's in turn: each end
# lets go of the one GPU-to-GPU lane (GPU 0 -> GPU 1) that names it, every byte stays right, and no
# handle of an ended context reaches the driver (the app fails on one).
run peer_reset "devices=2" 0 1 2 30 peer-reset
CMT_FAKE_CUDA=devices=2 LD_PRELOAD=$lib CMT_LOG=info timeout 240 "$app" 1 20 9 peer-reset \
  > "$tmp/peer-reset-log.out" 2> "$tmp/peer-reset-log.err" ||
  { echo "FAIL peer-reset-log: exit $?"; fails=$((fails + 1)); }
ends=$(grep -c "ends (cuDevicePrimaryCtxReset_v2): cmt let go of [0-9]* staging lanes, 1 peer lanes" \
  "$tmp/peer-reset-log.err")
if [ "$ends" -eq 4 ]; then
  echo "ok   peer-reset: 4 context ends, each letting go of the GPU-to-GPU lane"
else
  echo "FAIL peer-reset: $ends context ends letting go of 1 peer lane (4 expected)"
  grep -v "lane ready" "$tmp/peer-reset-log.err" | head; fails=$((fails + 1))
fi

# Green contexts made current in turn and destroyed: cmt lets go of its lanes in each before the
# driver destroys it (cuGreenCtxDestroy, found for cmt by cuCtxFromGreenCtx's handle).
CMT_FAKE_CUDA= LD_PRELOAD=$lib CMT_LOG=info timeout 240 "$app" 1 20 9 green > "$tmp/green.out" \
  2> "$tmp/green.err" || { echo "FAIL green: exit $?"; cat "$tmp/green.out"; fails=$((fails + 1)); }
ends=$(grep -c "ends (cuGreenCtxDestroy): cmt let go of 2 staging lanes" "$tmp/green.err")
if [ "$ends" -eq 4 ]; then
  echo "ok   green: 4 green contexts destroyed, each letting go of 2 lanes; $(cat "$tmp/green.out")"
else
  echo "FAIL green: $ends green contexts' ends letting go of 2 lanes (4 expected)"
  grep -v "lane ready" "$tmp/green.err" | head; fails=$((fails + 1))
fi

python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
for name in ("register_fails", "events_fail", "no_context"):
    s = json.load(open(f"{sys.argv[1]}/{name}.json"))
    taken = s["taken"]["h2d"]["calls"] + s["taken"]["d2h"]["calls"]
    assert taken == 0, (name, s)
print("ok   the engine never ran where it could not start")
PY
[ "$fails" -eq 0 ] || { echo "FAIL: $fails scenario(s)"; exit 1; }
echo "ok: cmt end to end on the fake driver, clean and under injected faults"
