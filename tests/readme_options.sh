#!/bin/sh
# The README's table of options is the option table's own (`cmt profile options --markdown`), so
# the two cannot drift apart. To update it: paste that command's output between the markers.
set -eu
cmt=$1
readme=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmt" profile options --markdown > "$tmp/table.md"
sed -n '/<!-- options:begin/,/<!-- options:end/p' "$readme" | sed '1d;$d' > "$tmp/readme.md"
if ! diff -u "$tmp/readme.md" "$tmp/table.md"; then
  echo "FAIL: README.md's options table differs from 'cmt profile options --markdown' (above)"
  exit 1
fi
echo "ok: README.md's options table is the option table ($(wc -l < "$tmp/table.md") lines)"
