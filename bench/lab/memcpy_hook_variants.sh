#!/bin/sh
# The memcpy hook variants (memcpy_hook_variants.cpp) against no hook and libcmt-host.so (A),
# alternating, ns per 64-byte call; then B behind libcmt.so (Bc), the pair under `cmt run` (run)
# and libcmt-host.so alone (hook). usage: bench/lab/memcpy_hook_variants.sh BUILD_DIR [ROUNDS]
b=$1; r=${2:-5}; d=$(dirname "$0"); o=${TMPDIR:-/tmp}/hookvar; mkdir -p $o
for v in B C D E; do g++ -O2 -fPIC -shared -std=c++17 -DVARIANT="'$v'" -o $o/h$v.so $d/memcpy_hook_variants.cpp -ldl || exit 1; done
for i in $(seq $r); do
  printf "none "; $b/cmt-bench-host small --calls 300000000 | grep -o '"ns_per_call": [0-9.]*'
  printf "A    "; LD_PRELOAD="$b/libcmt.so $b/libcmt-host.so" $b/cmt-bench-host small --calls 300000000 | grep -o '"ns_per_call": [0-9.]*'
  for v in B C D E; do printf "$v    "; LD_PRELOAD=$o/h$v.so $b/cmt-bench-host small --calls 300000000 | grep -o '"ns_per_call": [0-9.]*'; done
  # B behind libcmt.so, and the real pair as `cmt run` loads it: does libcmt.so's presence cost?
  printf "Bc   "; LD_PRELOAD="$b/libcmt.so $o/hB.so" $b/cmt-bench-host small --calls 300000000 | grep -o '"ns_per_call": [0-9.]*'
  printf "run  "; $b/cmt run -- $b/cmt-bench-host small --calls 300000000 | grep -o '"ns_per_call": [0-9.]*'
  printf "hook "; LD_PRELOAD="$b/libcmt-host.so" $b/cmt-bench-host small --calls 300000000 | grep -o '"ns_per_call": [0-9.]*'
done
