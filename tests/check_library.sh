#!/bin/sh
# libcmt.so exports its hooks and nothing else, and pulls no CUDA runtime, spdlog, fmt, hwloc or
# numa shared library into the host process.
set -eu
lib=$1
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBVi]$/ {print $3}' | sort | tr '\n' ' ')
# The runtime hooks, the 64-bit driver copy hooks (never the legacy 32-bit cuMemcpyHtoD),
# cuGetProcAddress and dlsym; and cmt's one function of its own.
expected=$(printf '%s\n' cudaMemcpy cudaMemcpyAsync cudaMemcpyAsync_ptsz cudaMemcpy_ptds \
  cuMemcpyHtoD_v2 cuMemcpyHtoD_v2_ptds cuMemcpyDtoH_v2 cuMemcpyDtoH_v2_ptds \
  cuMemcpyHtoDAsync_v2 cuMemcpyHtoDAsync_v2_ptsz cuMemcpyDtoHAsync_v2 cuMemcpyDtoHAsync_v2_ptsz \
  cuMemcpy cuMemcpy_ptds cuMemcpyAsync cuMemcpyAsync_ptsz cuGetProcAddress cuGetProcAddress_v2 \
  dlsym cmt_forward_this_thread | sort | tr '\n' ' ')
if [ "$exported" != "$expected" ]; then
  echo "FAIL: libcmt.so exports [$exported], expected [$expected]"; exit 1
fi
if readelf -r "$lib" | grep -q TEXTREL || readelf -lW "$lib" | grep GNU_STACK | grep -q RWE; then
  echo "FAIL: libcmt.so has text relocations or asks for an executable stack"; exit 1
fi
if nm -D --defined-only "$lib" | grep -q '@'; then
  echo "FAIL: exported symbols carry a version:"; nm -D --defined-only "$lib" | grep '@'; exit 1
fi
needed=$(readelf -d "$lib" | awk '/NEEDED/ {print $5}' | tr -d '[]' | tr '\n' ' ')
for bad in cudart spdlog fmt hwloc numa cuda; do
  case "$needed" in *lib$bad*) echo "FAIL: libcmt.so needs lib$bad ($needed)"; exit 1;; esac
done
echo "ok: exports [$exported]; needs [$needed]"
