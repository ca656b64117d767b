#!/bin/bash
# Hot buffers' safety suite (issue 33): hot_safety_app's randomized copies, frees, reallocations,
# remaps, madvise, malloc_trim and forks, every copied byte checked, under `cmt run` with
# register = hot, over several seeds; cmt must have registered buffers, copied from the
# registrations and dropped registrations on releases, with 0 wrong bytes. On a GPU, also the same
# program registering its own buffers and never unregistering them before munmap, with no cmt:
# it must see wrong bytes (stale pages), which shows that the check can fail.
# usage: hot_safety.sh CMT APP OPS SEEDS [gpu]
set -u
cmt=$1 app=$2 ops=$3 seeds=$4 gpu=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 total_ops=0 total_copies=0
# Every copy of 64 KiB or more is cmt's (staged or from a registration), so that none meets the
# fake driver's own copies, which do not wait as a pageable copy must.
export CMT_THRESHOLD=64K CMT_D2H_THRESHOLD=64K CMT_WARM_THRESHOLD=64K CMT_D2H_WARM_THRESHOLD=64K
for seed in $(seq 1 "$seeds"); do
  CMT_REGISTER=hot CMT_STATS=$tmp/stats-$seed.json CMT_LOG=warn timeout 600 \
    "$cmt" run -- "$app" "$ops" "$seed" > "$tmp/out-$seed" 2> "$tmp/err-$seed"
  rc=$?
  { [ $rc -eq 77 ] || [ $rc -eq 127 ]; } && { echo "no GPU or no CUDA driver: skipped"; exit 77; }
  cat "$tmp/out-$seed"
  if [ $rc -ne 0 ]; then
    echo "FAIL seed $seed: exit $rc"; head -20 "$tmp/err-$seed"; fails=$((fails + 1)); continue
  fi
  read -r o c <<< "$(awk '/^ops/ {print $2, $4}' "$tmp/out-$seed")"
  total_ops=$((total_ops + o)) total_copies=$((total_copies + c))
done
# The statistics of every seed's run together: registrations made, copies from them, and
# registrations dropped because their pages were released.
python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import glob, json, sys
regs = copies = dropped = evicted = refused = 0
for f in glob.glob(sys.argv[1] + "/stats-*.json"):
    h = json.load(open(f))["hot_buffers"]
    regs += h["registrations"]; copies += h["copies"]; dropped += h["invalidations"]
    evicted += h["evictions"]; refused += h["refusals"]
print(f"registrations {regs} copies_from_them {copies} dropped_on_release {dropped} "
      f"evicted {evicted} refused {refused}")
if regs == 0 or copies == 0 or dropped == 0:
    print("FAIL: the suite did not exercise registration, hot copies and invalidation")
    sys.exit(1)
PY
echo "total ops $total_ops copies $total_copies"
if [ "$gpu" = gpu ]; then
  timeout 300 "$app" 300 1 --self-register > "$tmp/self" 2>&1; rc=$?
  echo "without cmt, registrations never dropped before munmap: $(cat "$tmp/self") (exit $rc)"
  [ $rc -eq 1 ] || { echo "FAIL: stale pages not detected by the check"; fails=$((fails + 1)); }
fi
[ $fails -eq 0 ] && echo "hot_safety: all passed" || echo "hot_safety: $fails failures"
exit $((fails > 0))
