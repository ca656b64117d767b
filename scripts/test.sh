#!/usr/bin/env bash
# Builds cmt and runs every test: CPU tests everywhere, GPU tests where there is a GPU (they skip
# cleanly elsewhere).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
CMT_SETUP_TESTS=1 "$root/scripts/setup.sh"
build=${CMT_BUILD_DIR:-$root/build}
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
