#!/bin/sh
# libcmt.so exports exactly the names of its version script (made from hooks/hook_table.h) and
# nothing else, unversioned; among them the hooks every program needs and never a legacy 32-bit
# driver entry; and it pulls no CUDA runtime, spdlog, fmt, hwloc or numa shared library, nor the
# C++ runtime, into the host process; and it is never unmapped (-z nodelete), since its copy
# threads outlive a dlclose. libcmt-host.so, the memcpy hooks' own preload, exports exactly its
# map's names and needs libc alone. libcmt-engine.so, which libcmt.so loads on the first CUDA call,
# likewise: its map's names, libc alone, -z nodelete, and its own names bound to itself (-Bsymbolic).
set -eu
lib=$1
map=$2
hostlib=${3:-}
hostmap=${4:-}
enginelib=${5:-}
enginemap=${6:-}
# The names a library exports, and the names its version script makes global.
exports_of() { nm -D --defined-only "$1" | awk '$2 ~ /^[TWDBVi]$/ {print $3}' | sort | tr '\n' ' '; }
map_names() {
  sed -n '/global:/,/local:/p' "$1" | tr ' ;' '\n\n' | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' |
    grep -vx 'global\|local' | sort | tr '\n' ' '
}
needs_of() { readelf -d "$1" | awk '/NEEDED/ {print $5}' | tr -d '[]' | tr '\n' ' '; }
exported=$(exports_of "$lib")
expected=$(map_names "$map")
if [ "$exported" != "$expected" ]; then
  echo "FAIL: libcmt.so exports [$exported], its version script names [$expected]"; exit 1
fi
for name in cudaMemcpy cudaMemcpyAsync cuMemcpyHtoD_v2 cuMemcpyDtoHAsync_v2_ptsz cuGetProcAddress_v2 \
  dlsym cmt_forward_this_thread; do
  case " $exported " in *" $name "*) ;; *) echo "FAIL: libcmt.so does not export $name"; exit 1;; esac
done
for name in cuMemcpyHtoD cuMemcpyDtoH cuMemcpyHtoDAsync cuMemcpyDtoHAsync; do
  case " $exported " in *" $name "*) echo "FAIL: libcmt.so exports the legacy $name"; exit 1;; esac
done
if readelf -r "$lib" | grep -q TEXTREL || readelf -lW "$lib" | grep GNU_STACK | grep -q RWE; then
  echo "FAIL: libcmt.so has text relocations or asks for an executable stack"; exit 1
fi
if nm -D --defined-only "$lib" | grep -q '@'; then
  echo "FAIL: exported symbols carry a version:"; nm -D --defined-only "$lib" | grep '@'; exit 1
fi
# Its copy threads outlive any dlclose: the library must never be unmapped under them.
readelf -d "$lib" | grep -q "FLAGS_1.*NODELETE" || { echo "FAIL: libcmt.so is not linked -z nodelete"; exit 1; }
needed=$(needs_of "$lib")
# Nor the C++ runtime (linked in, hidden): each process under `cmt run` would pay for loading it.
for bad in cudart spdlog fmt hwloc numa cuda stdc++ gcc_s; do
  case "$needed" in *lib$bad*) echo "FAIL: libcmt.so needs lib$bad ($needed)"; exit 1;; esac
done
if [ -n "$hostlib" ]; then
  host_exported=$(exports_of "$hostlib")
  host_expected=$(map_names "$hostmap")
  [ "$host_exported" = "$host_expected" ] ||
    { echo "FAIL: libcmt-host.so exports [$host_exported], its map names [$host_expected]"; exit 1; }
  host_needed=$(needs_of "$hostlib")
  [ "$host_needed" = "libc.so.6 " ] || { echo "FAIL: libcmt-host.so needs [$host_needed]"; exit 1; }
  readelf -d "$hostlib" | grep -q "FLAGS_1.*NODELETE" || { echo "FAIL: libcmt-host.so is not -z nodelete"; exit 1; }
  echo "ok: libcmt-host.so exports [$host_exported]; needs [$host_needed]"
fi
if [ -n "$enginelib" ]; then
  engine_exported=$(exports_of "$enginelib")
  engine_expected=$(map_names "$enginemap")
  [ "$engine_exported" = "$engine_expected" ] ||
    { echo "FAIL: libcmt-engine.so exports [$engine_exported], its map names [$engine_expected]"; exit 1; }
  engine_needed=$(needs_of "$enginelib")
  for bad in cudart spdlog fmt hwloc numa cuda stdc++ gcc_s; do
    case "$engine_needed" in *lib$bad*) echo "FAIL: libcmt-engine.so needs lib$bad ($engine_needed)"; exit 1;; esac
  done
  readelf -d "$enginelib" | grep -q "FLAGS_1.*NODELETE" || { echo "FAIL: libcmt-engine.so is not -z nodelete"; exit 1; }
  readelf -d "$enginelib" | grep -q "(SYMBOLIC)" || { echo "FAIL: libcmt-engine.so is not -Bsymbolic"; exit 1; }
  echo "ok: libcmt-engine.so exports its map's $(echo "$engine_exported" | wc -w) names; needs [$engine_needed]"
fi
echo "ok: exports [$exported]; needs [$needed]"
