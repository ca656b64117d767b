#include "hooks/driver_hooks.h"

#include <cuda.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>

#include "interposer/classify.h"
#include "hooks/hook_scope.h"
#include "interposer/interposer.h"
#include "common/log.h"
#include "cuda/real_dl.h"

#undef cuGetProcAddress  // cuda.h maps it to _v2; both variants are hooked below, by real name

namespace cmt {
namespace {

// One libcuda entry point that cmt mirrors: its exported name and the real function cmt's hook
// forwards to (the first one handed out, or found by RTLD_NEXT). The hooks themselves are in
// g_hook_functions, at the same index.
struct DriverHook {
  const char* name;
  std::atomic<void*> real{nullptr};
};

enum Index : int {
  kHtoD,
  kHtoDPtds,
  kDtoH,
  kDtoHPtds,
  kHtoDAsync,
  kHtoDAsyncPtsz,
  kDtoHAsync,
  kDtoHAsyncPtsz,
  kMemcpy,
  kMemcpyPtds,
  kMemcpyAsync,
  kMemcpyAsyncPtsz,
  kGetProcAddress,
  kGetProcAddressV2,
  kHookCount,
};

// Constant-initialized, so it is complete before any code in the process can call a hook.
DriverHook g_hooks[kHookCount] = {
    {"cuMemcpyHtoD_v2"},
    {"cuMemcpyHtoD_v2_ptds"},
    {"cuMemcpyDtoH_v2"},
    {"cuMemcpyDtoH_v2_ptds"},
    {"cuMemcpyHtoDAsync_v2"},
    {"cuMemcpyHtoDAsync_v2_ptsz"},
    {"cuMemcpyDtoHAsync_v2"},
    {"cuMemcpyDtoHAsync_v2_ptsz"},
    {"cuMemcpy"},
    {"cuMemcpy_ptds"},
    {"cuMemcpyAsync"},
    {"cuMemcpyAsync_ptsz"},
    {"cuGetProcAddress"},
    {"cuGetProcAddress_v2"},
};
extern void* const g_hook_functions[kHookCount];

bool is_ours(const void* p) {
  static const void* self_base = [] {
    Dl_info self{};
    return dladdr(reinterpret_cast<void*>(&is_ours), &self) ? self.dli_fbase : nullptr;
  }();
  Dl_info info{};
  return self_base && dladdr(p, &info) && info.dli_fbase == self_base;
}

// Makes `found` the function hook `h` forwards to. Refuses a second, different one: a hook
// forwards to one real function only.
bool adopt(DriverHook& h, void* found) {
  if (!found || is_ours(found)) return false;
  void* expected = nullptr;
  return h.real.compare_exchange_strong(expected, found) || expected == found;
}

void* real_of(DriverHook& h) {
  void* fn = h.real.load(std::memory_order_acquire);
  if (fn) return fn;
  // Called directly (the program links libcuda): the next definition after libcmt.so.
  fn = real_dlsym(RTLD_NEXT, h.name);
  if (!fn) {
    if (void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
      fn = real_dlsym(lib, h.name);
      dlclose(lib);
    }
  }
  return adopt(h, fn) ? h.real.load(std::memory_order_acquire) : nullptr;
}

CUstream explicit_stream(CUstream stream, bool per_thread_default) {
  if (stream) return stream;
  return per_thread_default ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

void* as_pointer(CUdeviceptr p) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));
}

// Offers the copy to the engine (unless a runtime hook on this thread already did), then
// forwards whatever it did not handle to the real entry point: `forward(real, bytes_done)`.
template <typename Fn, typename Forward>
CUresult take_or_forward(DriverHook& h, void* dst, const void* src, std::size_t bytes, int kind,
                         CUstream stream, bool synchronous, Forward&& forward) {
  auto real = reinterpret_cast<Fn>(real_of(h));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  std::size_t done = 0;
  if (!RuntimeHookScope::active())
    done =
        Interposer::instance().try_copy(dst, src, bytes, kind, stream, synchronous, Entry::Driver);
  if (done == bytes && bytes != 0) return CUDA_SUCCESS;
  return forward(real, done);
}

// ---- the copy hooks, one per variant -----------------------------------------------------------

using HtoDFn = CUresult (*)(CUdeviceptr, const void*, size_t);
using DtoHFn = CUresult (*)(void*, CUdeviceptr, size_t);
using HtoDAsyncFn = CUresult (*)(CUdeviceptr, const void*, size_t, CUstream);
using DtoHAsyncFn = CUresult (*)(void*, CUdeviceptr, size_t, CUstream);
using MemcpyFn = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t);
using MemcpyAsyncFn = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream);

template <Index I, bool PerThread>
CUresult htod(CUdeviceptr dst, const void* src, size_t n) {
  return take_or_forward<HtoDFn>(
      g_hooks[I], as_pointer(dst), src, n, kHostToDevice, explicit_stream(nullptr, PerThread), true,
      [&](HtoDFn real, std::size_t done) {
        return real(dst + done, static_cast<const char*>(src) + done, n - done);
      });
}

template <Index I, bool PerThread>
CUresult dtoh(void* dst, CUdeviceptr src, size_t n) {
  return take_or_forward<DtoHFn>(
      g_hooks[I], dst, as_pointer(src), n, kDeviceToHost, explicit_stream(nullptr, PerThread), true,
      [&](DtoHFn real, std::size_t done) {
        return real(static_cast<char*>(dst) + done, src + done, n - done);
      });
}

template <Index I, bool PerThread>
CUresult htod_async(CUdeviceptr dst, const void* src, size_t n, CUstream stream) {
  return take_or_forward<HtoDAsyncFn>(
      g_hooks[I], as_pointer(dst), src, n, kHostToDevice, explicit_stream(stream, PerThread), false,
      [&](HtoDAsyncFn real, std::size_t done) {
        return real(dst + done, static_cast<const char*>(src) + done, n - done, stream);
      });
}

template <Index I, bool PerThread>
CUresult dtoh_async(void* dst, CUdeviceptr src, size_t n, CUstream stream) {
  return take_or_forward<DtoHAsyncFn>(
      g_hooks[I], dst, as_pointer(src), n, kDeviceToHost, explicit_stream(stream, PerThread), false,
      [&](DtoHAsyncFn real, std::size_t done) {
        return real(static_cast<char*>(dst) + done, src + done, n - done, stream);
      });
}

// cuMemcpy: unified addressing, the direction comes from the pointers (cudaMemcpyDefault).
template <Index I, bool PerThread>
CUresult memcpy_any(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return take_or_forward<MemcpyFn>(
      g_hooks[I], as_pointer(dst), as_pointer(src), n, kDefault,
      explicit_stream(nullptr, PerThread), true,
      [&](MemcpyFn real, std::size_t done) { return real(dst + done, src + done, n - done); });
}

template <Index I, bool PerThread>
CUresult memcpy_any_async(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream) {
  return take_or_forward<MemcpyAsyncFn>(g_hooks[I], as_pointer(dst), as_pointer(src), n, kDefault,
                                        explicit_stream(stream, PerThread), false,
                                        [&](MemcpyAsyncFn real, std::size_t done) {
                                          return real(dst + done, src + done, n - done, stream);
                                        });
}

// ---- cuGetProcAddress: the real answer, with cmt's hook swapped in for the exact variant -----

// The hook for `p`, which the driver returned for `symbol` (a base name such as "cuMemcpyHtoD",
// which the driver resolved to one variant by version and flags). Each variant of that base
// name that cmt mirrors is looked up in the object `p` came from: the one at `p` is the one.
void* swap_in_hook(const char* symbol, void* p) {
  if (!symbol || !p || is_ours(p)) return p;
  const std::size_t len = std::strlen(symbol);
  Dl_info info{};
  struct link_map* object = nullptr;
  bool located = false;
  for (int i = 0; i < kHookCount; ++i) {
    DriverHook& h = g_hooks[i];
    if (std::strncmp(h.name, symbol, len) != 0 || (h.name[len] != '\0' && h.name[len] != '_'))
      continue;
    if (!located) {
      located = true;
      if (!dladdr1(p, &info, reinterpret_cast<void**>(&object), RTLD_DL_LINKMAP)) object = nullptr;
    }
    if (object && real_dlsym(object, h.name) == p && adopt(h, p)) {
      CMT_LOG(debug, "cuGetProcAddress({}): cmt's hook of {}", symbol, h.name);
      return g_hook_functions[i];
    }
  }
  if (located)
    CMT_LOG(debug, "cuGetProcAddress({}): a variant cmt does not hook, left alone", symbol);
  return p;
}

using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t);
using GetProcAddressV2Fn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult*);

bool names_copy_entry(const char* symbol) {
  return symbol && (std::strncmp(symbol, "cuMemcpy", 8) == 0 ||
                    std::strncmp(symbol, "cuGetProcAddress", 16) == 0);
}

CUresult get_proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  auto real = reinterpret_cast<GetProcAddressFn>(real_of(g_hooks[kGetProcAddress]));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && pfn && *pfn && names_copy_entry(symbol)) {
    (void)Interposer::instance();  // its configuration sets the log level
    *pfn = swap_in_hook(symbol, *pfn);
  }
  return r;
}

CUresult get_proc_address_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  auto real = reinterpret_cast<GetProcAddressV2Fn>(real_of(g_hooks[kGetProcAddressV2]));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && pfn && *pfn && names_copy_entry(symbol)) {
    (void)Interposer::instance();
    *pfn = swap_in_hook(symbol, *pfn);
  }
  return r;
}

void* const g_hook_functions[kHookCount] = {
    reinterpret_cast<void*>(&htod<kHtoD, false>),
    reinterpret_cast<void*>(&htod<kHtoDPtds, true>),
    reinterpret_cast<void*>(&dtoh<kDtoH, false>),
    reinterpret_cast<void*>(&dtoh<kDtoHPtds, true>),
    reinterpret_cast<void*>(&htod_async<kHtoDAsync, false>),
    reinterpret_cast<void*>(&htod_async<kHtoDAsyncPtsz, true>),
    reinterpret_cast<void*>(&dtoh_async<kDtoHAsync, false>),
    reinterpret_cast<void*>(&dtoh_async<kDtoHAsyncPtsz, true>),
    reinterpret_cast<void*>(&memcpy_any<kMemcpy, false>),
    reinterpret_cast<void*>(&memcpy_any<kMemcpyPtds, true>),
    reinterpret_cast<void*>(&memcpy_any_async<kMemcpyAsync, false>),
    reinterpret_cast<void*>(&memcpy_any_async<kMemcpyAsyncPtsz, true>),
    reinterpret_cast<void*>(&get_proc_address),
    reinterpret_cast<void*>(&get_proc_address_v2),
};

int find_hook(const char* name) {
  for (int i = 0; i < kHookCount; ++i)
    if (std::strcmp(g_hooks[i].name, name) == 0) return i;
  return -1;
}
}  // namespace

bool is_libcmt_address(const void* address) {
  return is_ours(address);
}

bool is_hooked_runtime_symbol(const char* name) {
  if (!name || std::strncmp(name, "cudaMemcpy", 10) != 0) return false;
  for (const char* n : {"cudaMemcpy", "cudaMemcpy_ptds", "cudaMemcpyAsync", "cudaMemcpyAsync_ptsz"})
    if (std::strcmp(name, n) == 0) return true;
  return false;
}

bool is_hooked_driver_symbol(const char* name) {
  return name && name[0] == 'c' && name[1] == 'u' && (name[2] == 'M' || name[2] == 'G') &&
         find_hook(name) >= 0;
}

void* driver_hook_for_symbol(const char* name, void* found) {
  int i = name ? find_hook(name) : -1;
  if (i < 0 || !adopt(g_hooks[i], found)) return found;
  return g_hook_functions[i];
}

}  // namespace cmt

// ---- exported names: programs that link libcuda bind to these ----------------------------------

#define CMT_EXPORT extern "C" __attribute__((visibility("default")))

CMT_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  return cmt::htod<cmt::kHtoD, false>(dst, src, n);
}
CMT_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  return cmt::htod<cmt::kHtoDPtds, true>(dst, src, n);
}
CMT_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  return cmt::dtoh<cmt::kDtoH, false>(dst, src, n);
}
CMT_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  return cmt::dtoh<cmt::kDtoHPtds, true>(dst, src, n);
}
CMT_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return cmt::htod_async<cmt::kHtoDAsync, false>(dst, src, n, s);
}
CMT_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n,
                                              CUstream s) {
  return cmt::htod_async<cmt::kHtoDAsyncPtsz, true>(dst, src, n, s);
}
CMT_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return cmt::dtoh_async<cmt::kDtoHAsync, false>(dst, src, n, s);
}
CMT_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return cmt::dtoh_async<cmt::kDtoHAsyncPtsz, true>(dst, src, n, s);
}
CMT_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return cmt::memcpy_any<cmt::kMemcpy, false>(dst, src, n);
}
CMT_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return cmt::memcpy_any<cmt::kMemcpyPtds, true>(dst, src, n);
}
CMT_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return cmt::memcpy_any_async<cmt::kMemcpyAsync, false>(dst, src, n, s);
}
CMT_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return cmt::memcpy_any_async<cmt::kMemcpyAsyncPtsz, true>(dst, src, n, s);
}
CMT_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version,
                                     cuuint64_t flags) {
  return cmt::get_proc_address(symbol, pfn, version, flags);
}
CMT_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  return cmt::get_proc_address_v2(symbol, pfn, version, flags, status);
}
