#!/usr/bin/env bash
# Installs what cmt needs to build (Debian 12+/Ubuntu 24.04+ packages; the CUDA Toolkit is
# expected at /usr/local/cuda or $CUDA_HOME) and builds it into build/. Safe to run again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${CMT_BUILD_DIR:-$root/build}
packages=(cmake ninja-build g++ pkg-config python3 libnuma-dev libhwloc-dev libspdlog-dev
          libfmt-dev libtomlplusplus-dev libgtest-dev libcli11-dev)
# scripts/test.sh also renders the results page in headless Chromium, and measures functions'
# lengths with Universal Ctags.
[ "${CMT_SETUP_TESTS:-0}" = 1 ] && packages+=(chromium universal-ctags)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "cmt setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda/bin/nvcc" ] && ! command -v nvcc >/dev/null; then
  echo "cmt setup: the CUDA Toolkit was not found at $cuda (set CUDA_HOME to where it is)" >&2
  exit 1
fi
extra=()
[ -d "$root/.deps/include" ] && extra+=("-DCMAKE_INCLUDE_PATH=$root/.deps/include")
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$cuda" \
  "${extra[@]}" >/dev/null
cmake --build "$build"
