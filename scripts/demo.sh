#!/usr/bin/env bash
# cmt's main job on a built-in workload: pageable cudaMemcpy of 4 MiB to 1 GiB, both directions,
# CUDA's default path against cmt against pinned memory, side by side in one process, every
# copy's bytes checked (`cmt bench copy`). Arguments replace the defaults (e.g. --sizes 64M,1G
# --reps 5 --json out.json --plot out.svg).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build=${CMT_BUILD_DIR:-$root/build}
if [ $# -eq 0 ]; then set -- --sizes 4M,16M,64M,256M,1G --reps 5; fi
exec "$build/cmt" bench copy "$@"
