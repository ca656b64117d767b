#!/bin/bash
# A CPU quota, end to end (common/cpu_quota.h): in a cgroup limited to half a CPU (what docker
# --cpus=0.5 makes), `cmt topo` and `cmt profile show` say the quota, a profile's threads = 2 is
# capped to 1 with a warning naming the quota's file, and the engine's lanes run 1 copy thread
# (the fake libcuda's program, bytes checked); a CMT_THREADS from the environment is kept; outside
# the group the same profile runs 2. Needs a cgroup it can make (root, a writable cpu controller,
# v1 or v2): skipped (77) elsewhere.
set -u
cli=$1
lib=$2
app=$3
tmp=$(mktemp -d)
group=""
cleanup() {
  [ -n "$group" ] && rmdir "$group" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# A child group with a limit of 50 ms in each 100 ms, or nothing.
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  group=/sys/fs/cgroup/cmt-quota-test-$$
  { grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
      echo +cpu > /sys/fs/cgroup/cgroup.subtree_control; } 2>/dev/null &&
    mkdir "$group" 2>/dev/null && echo "50000 100000" > "$group/cpu.max" 2>/dev/null || group=""
else
  v1=$(ls -d /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup/cpu 2>/dev/null | head -1)
  if [ -n "$v1" ]; then
    group=$v1/cmt-quota-test-$$
    mkdir "$group" 2>/dev/null && echo 100000 > "$group/cpu.cfs_period_us" 2>/dev/null &&
      echo 50000 > "$group/cpu.cfs_quota_us" 2>/dev/null || { rmdir "$group" 2>/dev/null; group=""; }
  fi
fi
if [ -z "$group" ]; then
  echo "skipped: cannot make a cgroup with a CPU limit here"
  exit 77
fi

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# inside CMD...: CMD in the limited group
inside() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$group" "$@"; }

printf 'schema = 1\n[cmt]\nthreads = 2\n' > "$tmp/two.toml"
export CMT_CONFIGS_DIR=

inside "$cli" topo > "$tmp/topo.txt" 2>&1
grep -q "^CPU quota  0.5 CPUs ($group/cpu\.[a-z_.]*: .*): cmt's copy threads are sized by it" \
  "$tmp/topo.txt" || { fail "cmt topo does not say the quota"; cat "$tmp/topo.txt"; }

CMT_PROFILE=$tmp/two.toml inside "$cli" profile show > "$tmp/show.txt" 2>&1
grep -q "^# CPU quota: 0.5 CPUs .*sized for 1 CPU$" "$tmp/show.txt" &&
  grep -q "threads (profile $tmp/two.toml) = 2 is more than this process's CPU quota keeps busy, 0.5 CPUs ($group/" "$tmp/show.txt" ||
  { fail "cmt profile show does not say the quota and the cap"; head -5 "$tmp/show.txt"; }

# lanes NAME: the threads per copy of the program's lanes, each lane's line alike, or "none"
lanes() {
  local n
  n=$(grep -o "lane ready: .*, [0-9]* threads per copy" "$tmp/$1.err" | grep -o "[0-9]* threads" | sort -u)
  [ "$(echo "$n" | wc -l)" -eq 1 ] && [ -n "$n" ] && echo "${n% threads}" || echo none
}
# run NAME WHERE(inside or env) [VAR=VALUE]: the fake libcuda's program under libcmt.so
run() {
  local name=$1 where=$2
  shift 2
  $where env "$@" LD_PRELOAD="$lib" CMT_LOG=info CMT_PROFILE="$tmp/two.toml" \
    timeout 120 "$app" 1 3 7 > "$tmp/$name.out" 2> "$tmp/$name.err" ||
    { fail "$name: the program failed"; tail -5 "$tmp/$name.out" "$tmp/$name.err"; }
  grep -q " wrong 0" "$tmp/$name.out" || fail "$name: wrong bytes ($(cat "$tmp/$name.out"))"
}

run capped inside
[ "$(lanes capped)" = 1 ] || fail "capped: threads per copy $(lanes capped), expected 1"
grep -q "threads (profile $tmp/two.toml) = 2 is more than this process's CPU quota keeps busy.*; using 1$" \
  "$tmp/capped.err" || { fail "capped: no warning naming the quota"; grep cmt "$tmp/capped.err" | head -5; }

run env_kept inside CMT_THREADS=2
[ "$(lanes env_kept)" = 2 ] || fail "env_kept: threads per copy $(lanes env_kept), expected 2"
grep -q "threads (env CMT_THREADS) = 2 is more than this process's CPU quota keeps busy.*kept, as set in the environment" \
  "$tmp/env_kept.err" || fail "env_kept: no warning that CMT_THREADS is kept"

# Outside the group, where this process has no quota of its own and 2 cores or more.
if [ "$(nproc)" -ge 2 ] && ! "$cli" topo 2>/dev/null | grep -q "^CPU quota"; then
  run outside env
  [ "$(lanes outside)" = 2 ] || fail "outside: threads per copy $(lanes outside), expected 2"
  ! grep -q "quota" "$tmp/outside.err" || fail "outside: a quota said where there is none"
fi

[ "$fails" -eq 0 ] || { echo "FAIL: $fails check(s)"; exit 1; }
echo "ok: the quota said, a profile's threads capped to it, CMT_THREADS kept, bytes right"
