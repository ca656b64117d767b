// Which driver entry points end a context when a program calls cudaDeviceReset, and how cudart
// reaches them: an LD_PRELOAD shim (no cmt) that logs every cuGetProcAddress lookup of a name
// that creates, destroys, resets or releases a context, and every call made through the pointer
// it hands back. Build: g++ -O1 -shared -fPIC -I/usr/local/cuda/include context_end_probe.cpp
// -o libprobe.so -ldl; run: LD_PRELOAD=./libprobe.so PROGRAM.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

namespace {
using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using OfCtx = CUresult (*)(CUcontext);
using OfDev = CUresult (*)(CUdevice);
OfCtx g_destroy = nullptr;
OfDev g_reset = nullptr, g_release = nullptr;

CUresult logged_destroy(CUcontext c) {
  std::fprintf(stderr, "[probe] cuCtxDestroy(%p) via the table\n", static_cast<void*>(c));
  return g_destroy(c);
}
CUresult logged_reset(CUdevice d) {
  std::fprintf(stderr, "[probe] cuDevicePrimaryCtxReset(%d) via the table\n", d);
  return g_reset(d);
}
CUresult logged_release(CUdevice d) {
  std::fprintf(stderr, "[probe] cuDevicePrimaryCtxRelease(%d) via the table\n", d);
  return g_release(d);
}
}  // namespace

extern "C" CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  static auto real = reinterpret_cast<GetProc>(dlsym(RTLD_NEXT, "cuGetProcAddress_v2"));
  const CUresult r = real(symbol, pfn, version, flags, status);
  if (r != CUDA_SUCCESS || !pfn || !*pfn) return r;
  if (std::strstr(symbol, "Ctx") || std::strstr(symbol, "DeviceReset"))
    std::fprintf(stderr, "[probe] lookup %s version %d flags %llu\n", symbol, version,
                 static_cast<unsigned long long>(flags));
  if (!std::strcmp(symbol, "cuCtxDestroy")) {
    g_destroy = reinterpret_cast<OfCtx>(*pfn);
    *pfn = reinterpret_cast<void*>(&logged_destroy);
  } else if (!std::strcmp(symbol, "cuDevicePrimaryCtxReset")) {
    g_reset = reinterpret_cast<OfDev>(*pfn);
    *pfn = reinterpret_cast<void*>(&logged_reset);
  } else if (!std::strcmp(symbol, "cuDevicePrimaryCtxRelease")) {
    g_release = reinterpret_cast<OfDev>(*pfn);
    *pfn = reinterpret_cast<void*>(&logged_release);
  }
  return r;
}
