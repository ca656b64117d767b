#!/bin/sh
# readv_hook_cost (bench/lab/readv_hook_cost.cpp) without cmt and under libcmt.so + libcmt-host.so
# with the host leg armed, alternating; ns per write + read (readv) pair of 64 bytes on a socket.
# usage: bench/lab/readv_hook_cost.sh BUILD_DIR [ROUNDS] [CALLS]
b=$1; r=${2:-5}; n=${3:-1000000}
app=$b/tests/cmt_readv_cost_app
for i in $(seq "$r"); do
  printf "none %s\n" "$("$app" "$n")"
  printf "cmt  %s\n" "$(CMT_LOG=error LD_PRELOAD="$b/libcmt.so $b/libcmt-host.so" "$app" "$n")"
done
