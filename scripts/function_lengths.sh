#!/usr/bin/env bash
# Lines per source file and per function of cmt's own code (not tests), from Universal Ctags:
#   scripts/function_lengths.sh [--over N] [--check N]
# --over N lists every function longer than N lines (default 80), longest first, then the files.
# --check N prints only the functions over N lines outside data tables and fails if there are any
# (a data table is a function whose name says so: build_table, *_table).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
over=80
check=""
case "${1:-}" in
  --over) over=${2:?--over needs N} ;;
  --check) check=${2:?--check needs N} ;;
  "") ;;
  *) echo "usage: function_lengths.sh [--over N | --check N]" >&2; exit 2 ;;
esac
command -v ctags >/dev/null && ctags --version 2>/dev/null | grep -q Universal || {
  echo "function_lengths.sh: needs Universal Ctags (Debian: universal-ctags)" >&2; exit 77; }
cd "$root"
dirs=(interpose tuner cli bench)
functions() {
  ctags -R --languages=C++ --kinds-C++=f --fields=+ne -x --_xformat="%{end} %n %N %F" "${dirs[@]}" |
    awk '$1 ~ /^[0-9]+$/ { print $1 - $2 + 1, $3, $4 ":" $2 }' | sort -k1,1nr -k3
}
if [ -n "$check" ]; then
  long=$(functions | awk -v n="$check" '$1 > n && $2 !~ /(^build_table$|_table$)/')
  if [ -n "$long" ]; then
    echo "functions over $check lines (outside tests and data tables):"
    echo "$long"
    exit 1
  fi
  echo "ok: no function over $check lines outside tests and data tables"
  exit 0
fi
echo "functions over $over lines (lines, name, file:line):"
functions | awk -v n="$over" '$1 > n'
echo
echo "files (lines):"
find "${dirs[@]}" \( -name '*.cpp' -o -name '*.h' \) -print0 | xargs -0 wc -l | sort -nr | sed 1d | head -30
