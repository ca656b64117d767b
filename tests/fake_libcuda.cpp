// A stand-in libcuda.so.1 for CI: a cuGetProcAddress_v2 that resolves "cuMemcpyHtoD" to the
// variant CUDA would (the legacy 32-bit one before CUDA 3.2, _v2 after, _v2_ptds with the
// per-thread flag), and copy functions that only count their calls, as does its
// cuStreamSynchronize. It knows no other driver
// function, so cmt's engine cannot start on it and every copy is forwarded. getproc_hook.sh uses it
// to check, without a GPU, which pointers cmt's cuGetProcAddress hook swaps and that a swapped
// hook forwards each call exactly once.
#include <cuda.h>

#include <cstring>

#undef cuGetProcAddress
#undef cuMemcpyHtoD
#undef cuStreamSynchronize
#undef cuDevicePrimaryCtxReset

namespace {
int g_htod_v2 = 0, g_htod_v2_ptds = 0, g_htod_legacy = 0, g_syncs = 0, g_resets = 0;
int g_green_destroys = 0, g_resets_v1 = 0;
size_t g_last_bytes = 0;
}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void*,
                                                                size_t n) {
  ++g_htod_v2;
  g_last_bytes = n;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr, const void*,
                                                                     size_t n) {
  ++g_htod_v2_ptds;
  g_last_bytes = n;
  return CUDA_SUCCESS;
}

// The legacy entry point with a 32-bit device pointer.
__attribute__((visibility("default"))) CUresult cuMemcpyHtoD(unsigned int, const void*, size_t n) {
  ++g_htod_legacy;
  g_last_bytes = n;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t) {
  *p = 0;
  return CUDA_SUCCESS;
}

// Waits for nothing: counted, for the runtime's cudaStreamSynchronize to reach.
__attribute__((visibility("default"))) CUresult cuStreamSynchronize(CUstream) {
  ++g_syncs;
  return CUDA_SUCCESS;
}

// cudaDeviceReset's driver call (a static cudart finds it through cuGetProcAddress): counted.
__attribute__((visibility("default"))) CUresult cuDevicePrimaryCtxReset_v2(CUdevice) {
  ++g_resets;
  return CUDA_SUCCESS;
}

// Its first variant, which CUDA 13's cudart is answered with (lab/NOTES.md 103): counted apart.
__attribute__((visibility("default"))) CUresult cuDevicePrimaryCtxReset(CUdevice) {
  ++g_resets_v1;
  return CUDA_SUCCESS;
}

// A green context's end (CUDA 13's cudaExecutionCtxDestroy reaches it so): counted.
__attribute__((visibility("default"))) CUresult cuGreenCtxDestroy(CUgreenCtx) {
  ++g_green_destroys;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int version, cuuint64_t flags,
    CUdriverProcAddressQueryResult* status) {
  void* fn = nullptr;
  if (std::strcmp(symbol, "cuMemcpyHtoD") == 0)
    fn = version < 3020 ? reinterpret_cast<void*>(&cuMemcpyHtoD)
         : (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
             ? reinterpret_cast<void*>(&cuMemcpyHtoD_v2_ptds)
             : reinterpret_cast<void*>(&cuMemcpyHtoD_v2);
  else if (std::strcmp(symbol, "cuMemAlloc") == 0)
    fn = reinterpret_cast<void*>(&cuMemAlloc_v2);
  else if (std::strcmp(symbol, "cuStreamSynchronize") == 0)
    fn = reinterpret_cast<void*>(&cuStreamSynchronize);
  else if (std::strcmp(symbol, "cuDevicePrimaryCtxReset") == 0)
    fn = version < 11000 ? reinterpret_cast<void*>(&cuDevicePrimaryCtxReset)
                         : reinterpret_cast<void*>(&cuDevicePrimaryCtxReset_v2);
  else if (std::strcmp(symbol, "cuGreenCtxDestroy") == 0)
    fn = reinterpret_cast<void*>(&cuGreenCtxDestroy);
  else if (std::strcmp(symbol, "cuGetProcAddress") == 0)
    fn = reinterpret_cast<void*>(&cuGetProcAddress_v2);
  *pfn = fn;
  if (status) *status = fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

// For the test program: calls counted per variant, and the last size.
__attribute__((visibility("default"))) void fake_cuda_calls(int* v2, int* v2_ptds, int* legacy,
                                                            size_t* last_bytes) {
  *v2 = g_htod_v2;
  *v2_ptds = g_htod_v2_ptds;
  *legacy = g_htod_legacy;
  *last_bytes = g_last_bytes;
}

__attribute__((visibility("default"))) int fake_cuda_syncs() {
  return g_syncs;
}

__attribute__((visibility("default"))) int fake_cuda_resets() {
  return g_resets;
}

__attribute__((visibility("default"))) int fake_cuda_resets_v1() {
  return g_resets_v1;
}

__attribute__((visibility("default"))) int fake_cuda_green_destroys() {
  return g_green_destroys;
}

}  // extern "C"
