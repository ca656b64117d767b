#!/bin/sh
# The Debian package, unpacked anywhere, works as installed: cmt finds its libcmt.so, its tools
# and the shared profiles by their places in the package, runs a command under cmt with the
# command's exit status, and shows the configuration. Exit 77 where dpkg-deb is missing.
set -u
cpack=$1
build=$2
command -v dpkg-deb > /dev/null 2>&1 || { echo "no dpkg-deb: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
(cd "$build" && "$cpack" -G DEB -B "$tmp/out" > "$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack"; }
deb=$(ls "$tmp"/out/*.deb)
dpkg-deb -x "$deb" "$tmp/root" || fail "dpkg-deb -x $deb"
cmt=$tmp/root/usr/bin/cmt
for f in usr/bin/cmt usr/lib/cmt/libcmt.so usr/lib/cmt/libcmt-engine.so usr/lib/cmt/libcmt-host.so \
    usr/lib/cmt/cmt-bench-copy usr/lib/cmt/cmt-bench-replay \
    usr/lib/cmt/cmt-bench-concurrent usr/lib/cmt/cmt-bench-p2p usr/share/cmt/plot.py \
    usr/share/cmt/plot_concurrent.py usr/share/cmt/configs/README.md; do
  [ -e "$tmp/root/$f" ] || fail "the package lacks /$f"
done
ls "$tmp"/root/usr/share/cmt/configs/*.toml > /dev/null 2>&1 || fail "the package has no shared profile"
env -u CMT_LIBRARY -u CMT_CONFIGS_DIR "$cmt" run -- true || fail "cmt run -- true exited $?"
env -u CMT_LIBRARY "$cmt" run -- sh -c 'exit 3'; [ $? -eq 3 ] || fail "cmt run did not pass on the exit status"
env -u CMT_LIBRARY PATH="$tmp/root/usr/bin:$PATH" cmt run -- sh -c 'echo "$LD_PRELOAD"' > "$tmp/preload" 2>&1
# The hooks' AVX2 build where this processor has AVX2 (and the package has it), else the SSE2 one.
host=libcmt-host.so
grep -qw avx2 /proc/cpuinfo && [ -e "$tmp/root/usr/lib/cmt/libcmt-host-avx2.so" ] && host=libcmt-host-avx2.so
grep -qx "$(realpath "$tmp/root/usr/lib/cmt/libcmt.so"):$(realpath "$tmp/root/usr/lib/cmt/$host")" "$tmp/preload" ||
  fail "LD_PRELOAD was $(cat "$tmp/preload")"
# From PATH, as an installed cmt runs: it must still find where it lies.
env -u CMT_CONFIGS_DIR -u CMT_PROFILE PATH="$tmp/root/usr/bin:$PATH" cmt profile show > "$tmp/show" 2>&1 ||
  { cat "$tmp/show"; fail "cmt profile show"; }
grep -qx "# shared profiles: $(realpath "$tmp/root/usr/share/cmt/configs")" "$tmp/show" ||
  fail "cmt profile show did not find the package's shared profiles: $(head -1 "$tmp/show")"
grep -q "^CMT_THREADS=" "$tmp/show" || fail "cmt profile show printed no configuration"
"$cmt" bench copy --sizes 4K --reps 1 > "$tmp/bench" 2>&1
grep -q "not found beside" "$tmp/bench" && fail "cmt bench copy did not find cmt-bench-copy: $(cat "$tmp/bench")"
for b in "copy --threads 2 --sizes 4K --seconds 0.1 --rounds 1" "topo --sizes 4K --seconds 0.1 --rounds 1" \
         "p2p --bytes 4K --reps 1"; do
  "$cmt" bench $b > "$tmp/bench" 2>&1
  grep -q "not found beside" "$tmp/bench" && fail "cmt bench $b did not find its tool: $(cat "$tmp/bench")"
done
echo "ok: $(basename "$deb") unpacked runs cmt, finds libcmt.so, its tools and $(ls "$tmp"/root/usr/share/cmt/configs/*.toml | wc -l) shared profile(s)"
