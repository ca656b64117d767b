#!/bin/sh
# `cmt run`: the command's exit status and signals pass through, LD_PRELOAD gains libcmt.so and
# keeps what was there, and bad usage fails with a message.
set -u
cmt=$1
fail=0
check() { # name, condition result
  if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; fi
}
"$cmt" run -- sh -c 'exit 3'; check "exit status 3 passes through" $(( $? != 3 ))
out=$(LD_PRELOAD=/nonexistent/keep.so "$cmt" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
case "$out" in */libcmt.so:*/libcmt-host.so:/nonexistent/keep.so | */libcmt.so:*/libcmt-host-avx2.so:/nonexistent/keep.so) r=0;; *) r=1;; esac
check "LD_PRELOAD is libcmt.so, libcmt-host.so, then the old value (got [$out])" $r
# Host copies and fills off: their hooks (libcmt-host.so) are not loaded at all; either one on
# loads them.
out=$(CMT_HOST_COPY=off CMT_HOST_FILL=off "$cmt" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
case "$out" in */libcmt.so) r=0;; *) r=1;; esac
check "with host copies and fills off LD_PRELOAD is libcmt.so alone (got [$out])" $r
out=$(CMT_HOST_COPY=off "$cmt" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
case "$out" in */libcmt.so:*/libcmt-host.so | */libcmt.so:*/libcmt-host-avx2.so) r=0;; *) r=1;; esac
check "with fills on libcmt-host.so is loaded (got [$out])" $r
"$cmt" run -- sh -c 'kill -TERM $$'; rc=$?
check "a signal passes through (rc=$rc, want 143)" $(( rc != 143 ))
"$cmt" run -- /nonexistent/program 2>/tmp/cmt_cli_err.$$; rc=$?
check "a missing command exits 127 (rc=$rc)" $(( rc != 127 ))
grep -q "cannot run '/nonexistent/program'" /tmp/cmt_cli_err.$$; check "and names it" $?
rm -f /tmp/cmt_cli_err.$$
"$cmt" run 2>/dev/null; rc=$?
check "no command is an error (rc=$rc)" $(( rc == 0 ))
"$cmt" --bogus-flag 2>/tmp/cmt_cli_err.$$; rc=$?
check "an unknown flag is a usage error, status 2 (rc=$rc)" $(( rc != 2 ))
grep -q "not expected: --bogus-flag" /tmp/cmt_cli_err.$$; check "and names the flag" $?
"$cmt" 2>/tmp/cmt_cli_err.$$; rc=$?
check "no command is an error (rc=$rc)" $(( rc != 2 ))
grep -q "a command is required: run, tune, bench, profile or topo" /tmp/cmt_cli_err.$$; check "and lists them" $?
rm -f /tmp/cmt_cli_err.$$
out=$("$cmt" run -v -- true 2>&1)
case "$out" in *CMT_CHUNK_BYTES=*) r=0;; *) r=1;; esac
check "-v prints the effective configuration" $r
# Profiles that ask for too much: threads past the cores validate with a warning naming the limit;
# spinning past its bound is an error naming it (issue 31, finding 6).
ptmp=$(mktemp -d)
printf 'schema = 1\n[cmt]\nthreads = 256\n' > "$ptmp/many.toml"
"$cmt" profile validate "$ptmp/many.toml" >/dev/null 2>"$ptmp/err"; rc=$?
check "threads = 256 validates (rc=$rc)" $rc
grep -q "threads (profile .*many.toml) = 256 is more than the [0-9]* cores this process may run on" "$ptmp/err"
check "with a warning naming the cores" $?
printf 'schema = 1\n[cmt]\nspin_us = 1000000\n' > "$ptmp/spin.toml"
"$cmt" profile validate "$ptmp/spin.toml" >/dev/null 2>"$ptmp/err"; rc=$?
check "spin_us = 1000000 is refused (rc=$rc)" $(( rc == 0 ))
grep -q "expected an integer from 0 to 20000" "$ptmp/err"; check "naming the bound" $?
rm -rf "$ptmp"
# Profiles: a bad one stops `cmt run` with its reasons, as a bad CMT_* value does; validate and
# show say what is wrong or where each value comes from.
tmp=$(mktemp -d)
printf 'schema = 1\n[cmt]\nthreads = 6\nslotz = 3\n' > "$tmp/good.toml"
printf 'schema = 1\n[cmt]\nthreads = "lots"\n' > "$tmp/bad.toml"
"$cmt" run --profile "$tmp/bad.toml" -- true 2>"$tmp/err"; rc=$?
check "a bad profile stops cmt run (rc=$rc)" $(( rc != 2 ))
grep -q "bad.toml:3:11: key 'cmt.threads' = 'lots' is not valid" "$tmp/err"; check "and says where and why" $?
out=$("$cmt" run --profile "$tmp/good.toml" -- sh -c 'echo "$CMT_PROFILE"' 2>/dev/null)
[ "$out" = "$tmp/good.toml" ]; check "a good profile reaches the command as CMT_PROFILE ($out)" $?
# So do a bad CMT_* value and a bad CMT_PROFILE (inside a program they are warnings: hook_app.sh).
CMT_SPIN_US=-5 "$cmt" run -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "a bad variable stops cmt run (rc=$rc)" $(( rc != 2 ))
[ ! -e "$tmp/ran" ]; check "before the command runs" $?
grep -q "CMT_SPIN_US='-5' is not valid: expected an integer from 0 to 20000" "$tmp/err"
check "and names the variable, its value and what is expected" $?
CMT_PROFILE=$tmp/bad.toml "$cmt" run -- true 2>"$tmp/err"; rc=$?
check "a bad CMT_PROFILE stops cmt run (rc=$rc)" $(( rc != 2 ))
grep -q "bad.toml:3:11: key 'cmt.threads' = 'lots' is not valid" "$tmp/err"; check "and says where and why" $?
"$cmt" profile validate "$tmp/good.toml" >/dev/null 2>"$tmp/err"; rc=$?
check "validate accepts a good profile (rc=$rc)" $rc
grep -q "did you mean 'slots'" "$tmp/err"; check "and warns about unknown keys" $?
"$cmt" profile validate "$tmp/bad.toml" >/dev/null 2>&1; rc=$?
check "validate rejects a bad profile (rc=$rc)" $(( rc != 1 ))
out=$(CMT_SLOTS=9 "$cmt" profile show --profile "$tmp/good.toml" 2>/dev/null)
case "$out" in *"CMT_THREADS=6  (profile $tmp/good.toml)"*"CMT_SLOTS=9  (env CMT_SLOTS)"*) r=0;; *) r=1;; esac
check "show gives each value and its origin" $r
# Only regular files of at most 1 MiB are read as profiles: a FIFO and /dev/zero are refused at
# once (each under a timeout, so a hang fails instead of stalling the suite), and so is
# CMT_LIBRARY naming no file.
mkfifo "$tmp/fifo"
timeout 10 "$cmt" profile validate "$tmp/fifo" 2>"$tmp/err" >/dev/null; rc=$?
check "validate refuses a FIFO at once (rc=$rc)" $(( rc != 1 ))
grep -q "fifo: cannot read the profile: is a FIFO, not a regular file" "$tmp/err"; check "and says why" $?
CMT_PROFILE=/dev/zero timeout 10 "$cmt" profile show 2>"$tmp/err" >/dev/null; rc=$?
check "show refuses CMT_PROFILE=/dev/zero at once (rc=$rc)" $(( rc != 1 ))
grep -q "/dev/zero: cannot read the profile: is a device" "$tmp/err"; check "and says why" $?
"$cmt" profile validate "$tmp" 2>"$tmp/err" >/dev/null; rc=$?
grep -q "is a directory, not a profile" "$tmp/err"; check "a directory is named as one (rc=$rc)" $?
"$cmt" profile validate "$tmp/missing.toml" 2>"$tmp/err" >/dev/null
grep -q "missing.toml: cannot read the profile: No such file or directory" "$tmp/err"; check "a missing file says so" $?
CMT_LIBRARY=/nonexistent/libcmt.so "$cmt" run -- true 2>"$tmp/err"; rc=$?
check "CMT_LIBRARY naming no file stops cmt run (rc=$rc)" $(( rc != 2 ))
grep -q "CMT_LIBRARY='/nonexistent/libcmt.so' is not a readable file" "$tmp/err"; check "and says so" $?
# --record: a command that makes no CUDA call leaves an empty trace; the command's status passes;
# cmt trace show refuses what is not a trace, naming it.
"$cmt" run --record "$tmp/t.tsv" -- sh -c 'exit 4' 2>"$tmp/err"; rc=$?
check "cmt run --record passes the status on (rc=$rc)" $(( rc != 4 ))
grep -q "the copies of 0 process(es) recorded in $tmp/t.tsv" "$tmp/err"; check "and says what it recorded" $?
"$cmt" run --record /nonexistent/dir/t.tsv -- true 2>"$tmp/err"
grep -q "cannot write the trace to '/nonexistent/dir/t.tsv'" "$tmp/err"; check "an unwritable trace is named" $?
"$cmt" trace show "$tmp/err" >/dev/null 2>"$tmp/err2"; rc=$?
check "cmt trace show of a non-trace fails (rc=$rc)" $(( rc != 2 ))
grep -q "$tmp/err:1: expected '# cmt trace 6" "$tmp/err2"; check "naming the file and line" $?
# cmt tune --trace: a trace that cannot be read, or one with a command too, is refused.
"$cmt" tune --trace "$tmp/missing.tsv" --dry-run 2>"$tmp/err" >/dev/null; rc=$?
check "cmt tune --trace of a missing file fails (rc=$rc)" $(( rc != 2 ))
grep -q "$tmp/missing.tsv: cannot read the trace" "$tmp/err"; check "naming it" $?
"$cmt" tune --trace "$tmp/missing.tsv" -- true 2>"$tmp/err" >/dev/null; rc=$?
check "cmt tune --trace with a command fails (rc=$rc)" $(( rc != 2 ))
grep -q "give either --trace FILE or a command" "$tmp/err"; check "and says so" $?
# A libcmt.so without the engine beside it (libcmt.so loads it on the first CUDA call).
mkdir -p "$tmp/alone" && cp "$(dirname "$cmt")/libcmt.so" "$tmp/alone/"
CMT_LIBRARY="$tmp/alone/libcmt.so" "$cmt" run -- true 2>"$tmp/err"; rc=$?
check "a libcmt.so without libcmt-engine.so stops cmt run (rc=$rc)" $(( rc != 2 ))
grep -q "libcmt-engine.so is not beside $tmp/alone/libcmt.so" "$tmp/err"; check "and says so" $?
# This machine's own profile is found by fingerprint and sits under an explicit one.
mine=$(XDG_CONFIG_HOME="$tmp/xdg" "$cmt" profile path 2>/dev/null)
case "$mine" in "$tmp/xdg/cmt/profiles/"*.toml) r=0;; *) r=1;; esac
check "profile path is under XDG_CONFIG_HOME ($mine)" $r
mkdir -p "$(dirname "$mine")" && printf 'schema = 1\n[cmt]\nslots = 33\nthreads = 2\n' > "$mine"
out=$(XDG_CONFIG_HOME="$tmp/xdg" "$cmt" profile show --profile "$tmp/good.toml" 2>/dev/null)
case "$out" in *"CMT_THREADS=6  (profile $tmp/good.toml)"*"CMT_SLOTS=33  (profile $mine)"*) r=0;; *) r=1;; esac
check "show layers this machine's profile under the explicit one" $r
XDG_CONFIG_HOME="$tmp/xdg" "$cmt" profile export > "$tmp/export.toml" 2>/dev/null; rc=$?
check "profile export refuses a profile without [machine] (rc=$rc)" $(( rc == 0 ))
XDG_CONFIG_HOME="$tmp/none" "$cmt" profile export 2>"$tmp/err" >/dev/null; rc=$?
check "profile export without a profile is an error (rc=$rc)" $(( rc == 0 ))
grep -q "run \`cmt tune\` first" "$tmp/err"; check "and says to run cmt tune" $?
# This machine's own profile gone bad stops cmt run too, naming it.
mkdir -p "$tmp/xdgbad" && mine_bad=$(XDG_CONFIG_HOME="$tmp/xdgbad" "$cmt" profile path 2>/dev/null)
mkdir -p "$(dirname "$mine_bad")" && printf 'schema = 1\n[cmt]\nslots = "many"\n' > "$mine_bad"
XDG_CONFIG_HOME="$tmp/xdgbad" "$cmt" run -- true 2>"$tmp/err"; rc=$?
check "a bad machine profile stops cmt run (rc=$rc)" $(( rc != 2 ))
grep -q "$(basename "$mine_bad"):3:9: key 'cmt.slots' = 'many' is not valid" "$tmp/err"
check "and says where and why" $?
# cmt tune: bad input fails before any measurement.
"$cmt" tune --search bogus 2>"$tmp/err"; rc=$?
check "tune --search bogus is an error (rc=$rc)" $(( rc == 0 ))
grep -q "bogus not in {instant,full,grid}" "$tmp/err"; check "and names the choices" $?
"$cmt" tune --largest 1K 2>"$tmp/err"; rc=$?
check "tune --largest 1K is an error (rc=$rc)" $(( rc != 2 ))
grep -q "'1K' is not valid: expected a size of at least 4M" "$tmp/err"; check "and says what is expected" $?
CMT_THREADS=lots "$cmt" tune --dry-run -- true 2>"$tmp/err"; rc=$?
check "tune with a bad CMT_THREADS is an error (rc=$rc)" $(( rc != 2 ))
grep -q "CMT_THREADS='lots' is not valid" "$tmp/err" && ! grep -q "watching" "$tmp/err"
check "and says so before it watches anything" $?
mkdir "$tmp/scratch"
before=$(ls -d /tmp/cmt-tune-* 2>/dev/null | wc -l)
TMPDIR=$tmp/scratch "$cmt" tune -- sh -c 'exit 5' 2>"$tmp/err"; rc=$?
after=$(ls -d /tmp/cmt-tune-* 2>/dev/null | wc -l)
check "tune with a failing command fails (rc=$rc)" $(( rc != 1 ))
grep -q "the command failed (status 5); nothing was tuned" "$tmp/err"; check "and says so" $?
[ -z "$(ls -A "$tmp/scratch")" ] && [ "$after" -eq "$before" ]
check "and leaves no temporary files (in TMPDIR: $(ls -A "$tmp/scratch"); in /tmp: $before -> $after)" $?
# cmt bench copy: bad input fails with a message.
"$cmt" bench copy --reps 0 2>"$tmp/err"; rc=$?
check "bench copy --reps 0 is a usage error, status 2 (rc=$rc)" $(( rc != 2 ))
grep -q -e "--reps" "$tmp/err" && grep -q "1000" "$tmp/err"; check "and names the option and its range" $?
"$cmt" bench copy --threads 2 --stream sideways 2>"$tmp/err"; rc=$?
check "bench copy --stream sideways is an error (rc=$rc)" $(( rc == 0 ))
grep -q -e "--stream" "$tmp/err" && grep -q "null" "$tmp/err"; check "and names the option and its values" $?
bench_dir=$(dirname "$cmt")
"$cmt" bench copy --api sideways 2>"$tmp/err"; rc=$?
check "bench copy --api sideways is an error (rc=$rc)" $(( rc == 0 ))
grep -q -e "--api" "$tmp/err" && grep -q "batch" "$tmp/err"; check "and names the option and its values" $?
"$cmt" bench copy --api batch --batch-copies 0 2>"$tmp/err"; rc=$?
check "bench copy --batch-copies 0 is an error (rc=$rc)" $(( rc == 0 ))
grep -q -e "--batch-copies" "$tmp/err" && grep -q "4096" "$tmp/err"; check "and names the option and its range" $?
if [ -x "$bench_dir/cmt-bench-concurrent" ]; then
  "$bench_dir/cmt-bench-concurrent" --threads 1 --patterns both 2>"$tmp/err"; rc=$?
  check "concurrent both with one thread is an error (rc=$rc)" $(( rc != 2 ))
  grep -q "both needs --threads 2" "$tmp/err"; check "and says why" $?
  "$bench_dir/cmt-bench-concurrent" --patterns h2d,sideways 2>"$tmp/err"; rc=$?
  check "an unknown pattern is an error (rc=$rc)" $(( rc != 2 ))
  grep -q "unknown pattern 'sideways' (expected h2d, d2h or both)" "$tmp/err"; check "and names it" $?
fi
# cmt bench copy --processes: cmt-bench-processes, whose bad input is named.
"$cmt" bench copy --processes 2 --threads 2 2>"$tmp/err"; rc=$?
check "bench copy --processes with --threads is a usage error, status 2 (rc=$rc)" $(( rc != 2 ))
grep -q "cmt-bench-processes: .*--threads" "$tmp/err"; check "and names --threads: $(cat "$tmp/err")" $?
"$cmt" bench copy --processes 1 --patterns h2d,both 2>"$tmp/err"; rc=$?
check "processes both with one process is an error (rc=$rc)" $(( rc != 2 ))
grep -q "both needs 2 processes or more (half each way); --processes has only 1" "$tmp/err"
check "and says why: $(cat "$tmp/err")" $?
"$cmt" bench copy --processes 0 2>"$tmp/err"; rc=$?
check "bench copy --processes 0 is a usage error (rc=$rc)" $(( rc != 2 ))
grep -q -e "--processes" "$tmp/err" && grep -q "64" "$tmp/err"; check "and names its range" $?
"$cmt" bench p2p --reps 0 2>"$tmp/err"; rc=$?
check "bench p2p --reps 0 is an error (rc=$rc)" $(( rc == 0 ))
if [ -x "$bench_dir/cmt-bench-p2p" ]; then
  "$bench_dir/cmt-bench-p2p" --bytes 12Q 2>"$tmp/err"; rc=$?
  check "cmt-bench-p2p --bytes 12Q is an error (rc=$rc)" $(( rc != 2 ))
  grep -q "bad size '12Q' for --bytes" "$tmp/err"; check "and names it" $?
fi
"$cmt" bench bogus 2>/dev/null; rc=$?
check "an unknown bench is a usage error, status 2 (rc=$rc)" $(( rc != 2 ))
# Usage errors are cmt's: status 2 and a range in words, not CLI11's codes or a 300-digit bound
# (issue 31, finding 10).
"$cmt" tune --device -1 2>"$tmp/err"; rc=$?
check "tune --device -1 is a usage error, status 2 (rc=$rc)" $(( rc != 2 ))
grep -q -e "--device" "$tmp/err" && grep -q "1023" "$tmp/err" && [ "$(wc -c < "$tmp/err")" -lt 200 ]
check "and names the range in a short line: $(head -c 200 "$tmp/err")" $?
"$cmt" profile 2>/dev/null; rc=$?
check "profile without a subcommand is a usage error, status 2 (rc=$rc)" $(( rc != 2 ))
rm -rf "$tmp"
# cmt topo: a table, and JSON that parses, with or without a GPU.
"$cmt" topo | grep -q "^layout"; check "cmt topo prints the layout" $?
"$cmt" topo --json | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["cores"] > 0 and isinstance(d["gpus"], list)'
check "cmt topo --json is JSON with cores and gpus" $?
[ $fail -eq 0 ] && echo "ok: cmt run, profile, topo"
exit $fail
