#!/bin/sh
# libcmt.so exports its hooks and nothing else, and pulls no CUDA runtime, spdlog, fmt, hwloc or
# numa shared library into the host process.
set -eu
lib=$1
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBVi]$/ {print $3}' | sort | tr '\n' ' ')
expected="cudaMemcpy cudaMemcpyAsync cudaMemcpyAsync_ptsz cudaMemcpy_ptds "
if [ "$exported" != "$expected" ]; then
  echo "FAIL: libcmt.so exports [$exported], expected [$expected]"; exit 1
fi
if nm -D --defined-only "$lib" | grep -q '@'; then
  echo "FAIL: exported symbols carry a version:"; nm -D --defined-only "$lib" | grep '@'; exit 1
fi
needed=$(readelf -d "$lib" | awk '/NEEDED/ {print $5}' | tr -d '[]' | tr '\n' ' ')
for bad in cudart spdlog fmt hwloc numa cuda; do
  case "$needed" in *lib$bad*) echo "FAIL: libcmt.so needs lib$bad ($needed)"; exit 1;; esac
done
echo "ok: exports [$exported]; needs [$needed]"
