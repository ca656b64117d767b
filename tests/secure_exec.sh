#!/bin/sh
# In a secure-execution process (setuid), libcmt.so reads no CMT_* variable and writes nothing:
# the person who starts it must not choose which files a privileged process reads or writes. A
# setuid-root copy of a program that loads libcmt.so, started by `nobody` with CMT_PROFILE naming
# a root-only profile, CMT_STATS naming a file only root may create and CMT_LOG=info: no warning
# about the profile, no statistics file, no log. The same program without the setuid bit, run by
# root, shows that each variable is otherwise honoured. Exit 77 where this cannot be set up (not
# root, no setpriv, no user nobody, or a nosuid file system).
set -u
lib=$1
app=$2
[ "$(id -u)" = 0 ] || { echo "not root: skipped"; exit 77; }
command -v setpriv > /dev/null 2>&1 || { echo "no setpriv: skipped"; exit 77; }
getent passwd nobody > /dev/null 2>&1 || { echo "no user nobody: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
findmnt -no OPTIONS -T "$dir" 2>/dev/null | grep -q nosuid && { echo "nosuid $dir: skipped"; exit 77; }
engine=$(dirname "$lib")/libcmt-engine.so  # libcmt.so loads it from its own folder
cp "$lib" "$dir/libcmt.so" && cp "$engine" "$dir/libcmt-engine.so" && cp "$app" "$dir/app" &&
  cp "$app" "$dir/setuid-app"
chown root:root "$dir/libcmt.so" "$dir/libcmt-engine.so" "$dir/app" "$dir/setuid-app"
chmod 755 "$dir/libcmt.so" "$dir/libcmt-engine.so" "$dir/app"
chmod 4755 "$dir/setuid-app"
printf 'schema = 1\n[cmt]\nslots = "many"\n' > "$dir/root-only.toml"
chmod 600 "$dir/root-only.toml"
fail() { echo "FAIL: $*"; exit 1; }

# Honoured normally: root, no setuid bit.
env CMT_PROFILE="$dir/root-only.toml" CMT_STATS="$dir/plain.json" CMT_LOG=info \
  "$dir/app" "$dir/libcmt.so" > "$dir/plain.out" 2> "$dir/plain.err" || fail "the program fails ($(cat "$dir/plain.err"))"
grep -q "root-only.toml:3:9: key 'cmt.slots'" "$dir/plain.err" || fail "the control read no profile: $(cat "$dir/plain.err")"
[ -f "$dir/plain.json" ] || fail "the control wrote no statistics"

# Secure execution: nobody starts the setuid-root copy.
setpriv --reuid=65534 --regid=65534 --clear-groups \
  env CMT_PROFILE="$dir/root-only.toml" CMT_STATS="$dir/secure.json" CMT_LOG=info \
  "$dir/setuid-app" "$dir/libcmt.so" > "$dir/secure.out" 2> "$dir/secure.err" || fail "the setuid program fails ($(cat "$dir/secure.err"))"
grep -q "root-only" "$dir/secure.err" && fail "a setuid process read the profile CMT_PROFILE named: $(cat "$dir/secure.err")"
grep -q "\[cmt\] \[info\]" "$dir/secure.err" && fail "a setuid process honoured CMT_LOG=info: $(cat "$dir/secure.err")"
[ -e "$dir/secure.json" ] && fail "a setuid process wrote CMT_STATS ($(ls -l "$dir/secure.json"))"
cmp -s "$dir/plain.out" "$dir/secure.out" || fail "the program's output differs"
echo "ok: in a setuid process cmt read no CMT_* variable and wrote nothing"
