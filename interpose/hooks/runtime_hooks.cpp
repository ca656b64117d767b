// Hooks for the CUDA runtime's copy entry points. Each is thin: resolve the real function once,
// ask the interposer to take the copy, forward whatever it did not handle. The table below is the
// whole list; adding an entry point is one line there plus its exported wrapper.
#include <cuda.h>
#include <driver_types.h>

#include <atomic>
#include <cstddef>

#include "hooks/hook_scope.h"
#include "interposer/interposer.h"
#include "cuda/real_runtime.h"

namespace {

using MemcpyFn = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind);
using MemcpyAsyncFn = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);

template <typename Fn>
Fn resolve(std::atomic<void*>& slot, const char* name) {
  void* fn = slot.load(std::memory_order_acquire);
  if (!fn) {
    fn = cmt::real_runtime_symbol(name);
    slot.store(fn, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(fn);
}

struct RuntimeEntry {
  const char* name;
  bool per_thread_default;  // _ptds/_ptsz: a NULL stream is the calling thread's default stream
  std::atomic<void*> real;
};

RuntimeEntry g_memcpy{"cudaMemcpy", false, {}};
RuntimeEntry g_memcpy_ptds{"cudaMemcpy_ptds", true, {}};
RuntimeEntry g_memcpy_async{"cudaMemcpyAsync", false, {}};
RuntimeEntry g_memcpy_async_ptsz{"cudaMemcpyAsync_ptsz", true, {}};

CUstream explicit_stream(cudaStream_t stream, bool per_thread_default) {
  if (stream) return reinterpret_cast<CUstream>(stream);
  return per_thread_default ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

std::size_t offset_pointers(void*& dst, const void*& src, size_t& count, std::size_t done) {
  dst = static_cast<char*>(dst) + done;
  src = static_cast<const char*>(src) + done;
  count -= done;
  return done;
}

cudaError_t sync_copy(RuntimeEntry& e, void* dst, const void* src, size_t count,
                      cudaMemcpyKind kind) {
  auto real = resolve<MemcpyFn>(e.real, e.name);
  if (!real) return cudaErrorInitializationError;
  cmt::RuntimeHookScope scope;  // cudart's own cuMemcpy* calls below are not offered again
  std::size_t done = cmt::Interposer::instance().try_copy(
      dst, src, count, kind, explicit_stream(nullptr, e.per_thread_default), true,
      cmt::Entry::Runtime);
  if (done == count) return cudaSuccess;
  offset_pointers(dst, src, count, done);
  return real(dst, src, count, kind);
}

cudaError_t async_copy(RuntimeEntry& e, void* dst, const void* src, size_t count,
                       cudaMemcpyKind kind, cudaStream_t stream) {
  auto real = resolve<MemcpyAsyncFn>(e.real, e.name);
  if (!real) return cudaErrorInitializationError;
  cmt::RuntimeHookScope scope;
  std::size_t done = cmt::Interposer::instance().try_copy(
      dst, src, count, kind, explicit_stream(stream, e.per_thread_default), false,
      cmt::Entry::Runtime);
  if (done == count) return cudaSuccess;
  offset_pointers(dst, src, count, done);
  return real(dst, src, count, kind, stream);
}

}  // namespace

extern "C" {

// Every copy this thread makes from now on goes to CUDA untouched (nonzero), or is offered to cmt
// again (zero); returns the previous setting. For benchmarks that time CUDA's own path and cmt's
// in one process, and for programs that want CUDA's behaviour on one thread.
__attribute__((visibility("default"))) int cmt_forward_this_thread(int forward) {
  return cmt::ThreadOptOut::set(forward != 0) ? 1 : 0;
}

__attribute__((visibility("default"))) cudaError_t cudaMemcpy(void* dst, const void* src,
                                                              size_t count, cudaMemcpyKind kind) {
  return sync_copy(g_memcpy, dst, src, count, kind);
}

__attribute__((visibility("default"))) cudaError_t cudaMemcpy_ptds(void* dst, const void* src,
                                                                   size_t count,
                                                                   cudaMemcpyKind kind) {
  return sync_copy(g_memcpy_ptds, dst, src, count, kind);
}

__attribute__((visibility("default"))) cudaError_t cudaMemcpyAsync(void* dst, const void* src,
                                                                   size_t count,
                                                                   cudaMemcpyKind kind,
                                                                   cudaStream_t stream) {
  return async_copy(g_memcpy_async, dst, src, count, kind, stream);
}

__attribute__((visibility("default"))) cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src,
                                                                        size_t count,
                                                                        cudaMemcpyKind kind,
                                                                        cudaStream_t stream) {
  return async_copy(g_memcpy_async_ptsz, dst, src, count, kind, stream);
}

}  // extern "C"
