#!/usr/bin/env bash
# cmt's main job on a built-in workload: pageable cudaMemcpy of 4 MiB to 1 GiB, both directions,
# CUDA's default path against cmt against pinned memory, side by side in one process.
# Extra arguments go to cmt-bench-copy (e.g. --sizes 64M,1G --reps 5 --json out.json).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build=${CMT_BUILD_DIR:-$root/build}
exec "$build/cmt-bench-copy" --sizes 4M,16M,64M,256M,1G --reps 5 "$@"
