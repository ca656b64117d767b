#!/bin/sh
# bench/lab/free_hook_cost.cpp: ns per malloc(64) + free pair, without a free() hook and with the
# fast path a registration cache's hook would have (issue 33), alternating, on one core.
# usage: bench/lab/free_hook_cost.sh [ROUNDS] [PAIRS]
r=${1:-5}; n=${2:-100000000}; d=$(dirname "$0"); o=${TMPDIR:-/tmp}/free-hook; mkdir -p "$o"
g++ -O2 -fno-builtin -o "$o/loop" "$d/free_hook_cost.cpp" &&
  g++ -O2 -fPIC -shared -DHOOK -o "$o/hook.so" "$d/free_hook_cost.cpp" -ldl || exit 1
for i in $(seq "$r"); do
  printf "none %s  hook %s\n" "$(taskset -c 0 "$o/loop" "$n")" "$(LD_PRELOAD="$o/hook.so" taskset -c 0 "$o/loop" "$n")"
done
