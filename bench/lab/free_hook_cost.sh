#!/bin/sh
# bench/lab/free_hook_cost.cpp: ns per malloc(64) + free pair without libcmt-release.so, with it
# and nothing registered, and with it and registrations elsewhere, alternating, on one core.
# usage: bench/lab/free_hook_cost.sh BUILD_DIR [ROUNDS] [PAIRS]
b=$1; r=${2:-5}; n=${3:-100000000}; d=$(dirname "$0"); o=${TMPDIR:-/tmp}/free-hook; mkdir -p "$o"
g++ -O2 -fno-builtin -I"$d/../../interpose" -o "$o/loop" "$d/free_hook_cost.cpp" -ldl || exit 1
lib=$(realpath "$b/libcmt-release.so")
for i in $(seq "$r"); do
  printf "none %s  empty %s  elsewhere %s\n" "$(taskset -c 0 "$o/loop" "$n")" \
    "$(LD_PRELOAD=$lib taskset -c 0 "$o/loop" "$n" empty)" \
    "$(LD_PRELOAD=$lib taskset -c 0 "$o/loop" "$n" elsewhere)"
done
