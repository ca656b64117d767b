#!/bin/sh
# The result scripts still read the committed results: a table and a plot with six curves.
set -eu
src=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for json in "$src"/bench/results/*-copy.json; do
  python3 "$src/bench/summarize.py" "$json" | grep -q "| 1 GiB | h2d |"
  python3 "$src/bench/plot.py" "$json" "$out/plot.svg"
  n=$(grep -c 'class="curve"' "$out/plot.svg")
  [ "$n" -eq 6 ] || { echo "FAIL: $json gave $n curves, expected 6"; exit 1; }
done
echo "ok: summarize.py and plot.py read every copy result"
