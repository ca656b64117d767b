// Hooks of the CUDA runtime's copy entry points: the CMT_RUNTIME_HOOKS rows of hook_table.h. Each
// is thin: resolve the real function once, offer the copy to the interposer, forward whatever it
// did not handle. The host-memory rows call the real function and report what it handed out; the
// waits call it and, when the process records, keep the call.
#include <cuda.h>
#include <driver_types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/thread_context.h"
#include "cuda/real_runtime.h"
#include "hooks/exported.h"
#include "hooks/held_offer.h"
#include "hooks/hook_shapes.h"
#include "hooks/hook_table.h"
#include "interposer/interposer.h"
#include "interposer/recorder.h"

namespace cmt::hooks {
namespace {

enum class Runtime : int { CMT_RUNTIME_HOOKS(CMT_HOOK_ENUM) };

struct RuntimeEntry {
  const char* name;
  bool per_thread_default;  // _ptds/_ptsz: a NULL stream is the calling thread's default stream
  std::atomic<void*> real;
};

#define CMT_RUNTIME_ENTRY(name, shape, per_thread) {#name, (per_thread) != 0, {}},
RuntimeEntry g_entries[] = {CMT_RUNTIME_HOOKS(CMT_RUNTIME_ENTRY)};
#undef CMT_RUNTIME_ENTRY

template <Runtime H, typename Fn>
Fn resolve() {
  RuntimeEntry& e = g_entries[static_cast<int>(H)];
  void* fn = e.real.load(std::memory_order_acquire);
  if (!fn) {
    fn = real_runtime_symbol(e.name);
    e.real.store(fn, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(fn);
}

template <Runtime H>
CUstream explicit_stream(cudaStream_t stream) {
  if (stream) return reinterpret_cast<CUstream>(stream);
  return g_entries[static_cast<int>(H)].per_thread_default ? CU_STREAM_PER_THREAD
                                                           : CU_STREAM_LEGACY;
}

// The call as `cmt run --record` keeps it (interposer/recorder.h); nothing when not recording.
template <Runtime H>
RecordedCall record_copy(const void* dst, const void* src, size_t count, int kind,
                         CUstream stream) {
  return RecordedCall(g_entries[static_cast<int>(H)].name, direction_of_kind(kind),
                      host_side_of(dst, src, kind), count, stream);
}

cudaError_t recorded(RecordedCall& record, cudaError_t result, std::size_t done) {
  record.finish(result, done);
  return result;
}

void skip_done(void*& dst, const void*& src, size_t& count, std::size_t done) {
  dst = static_cast<char*>(dst) + done;
  src = static_cast<const char*>(src) + done;
  count -= done;
}

// ---- the shapes' handlers
// ------------------------------------------------------------------------

using MemcpyFn = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind);
using MemcpyAsyncFn = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);

template <Runtime H>
cudaError_t RuntimeCopy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  auto real = resolve<H, MemcpyFn>();
  if (!real) return cudaErrorInitializationError;
  RuntimeHookScope scope;  // cudart's own cuMemcpy* calls below are not offered again
  RecordedCall record = record_copy<H>(dst, src, count, kind, explicit_stream<H>(nullptr));
  CopyCallScope timed;
  const std::size_t done = held_offer([&] {
    return Interposer::offer_copy(dst, src, count, kind, explicit_stream<H>(nullptr), true,
                                  Entry::Runtime);
  });
  if (done == count && count != 0) return recorded(record, cudaSuccess, done);
  skip_done(dst, src, count, done);  // zero bytes: CUDA's to answer
  return recorded(record, real(dst, src, count, kind), done);
}

template <Runtime H>
cudaError_t RuntimeCopyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                             cudaStream_t stream) {
  auto real = resolve<H, MemcpyAsyncFn>();
  if (!real) return cudaErrorInitializationError;
  RuntimeHookScope scope;
  RecordedCall record = record_copy<H>(dst, src, count, kind, explicit_stream<H>(stream));
  CopyCallScope timed;
  const std::size_t done = held_offer([&] {
    return Interposer::offer_copy(dst, src, count, kind, explicit_stream<H>(stream), false,
                                  Entry::Runtime);
  });
  if (done == count && count != 0) return recorded(record, cudaSuccess, done);
  skip_done(dst, src, count, done);  // zero bytes: CUDA's to answer
  return recorded(record, real(dst, src, count, kind, stream), done);
}

// cudaMemcpyPeer(Async): between the named devices' primary contexts. The synchronous form is
// ordered on the legacy default stream of each.
using PeerFn = cudaError_t (*)(void*, int, const void*, int, size_t);
using PeerAsyncFn = cudaError_t (*)(void*, int, const void*, int, size_t, cudaStream_t);

std::size_t offer_peer(void* dst, int dst_device, const void* src, int src_device, size_t count,
                       CUstream stream, bool synchronous) {
  PeerCall call = PeerCall::of(reinterpret_cast<CUdeviceptr>(dst),
                               reinterpret_cast<CUdeviceptr>(src), count, stream, synchronous);
  call.dst_device = dst_device;
  call.src_device = src_device;
  return held_offer([&] { return Interposer::offer_peer_copy(call, Entry::Runtime); });
}

template <Runtime H>
cudaError_t RuntimePeer(void* dst, int dst_device, const void* src, int src_device, size_t count) {
  auto real = resolve<H, PeerFn>();
  if (!real) return cudaErrorInitializationError;
  RuntimeHookScope scope;
  std::size_t done =
      offer_peer(dst, dst_device, src, src_device, count, explicit_stream<H>(nullptr), true);
  if (done == count && count != 0) return cudaSuccess;
  skip_done(dst, src, count, done);
  return real(dst, dst_device, src, src_device, count);
}

template <Runtime H>
cudaError_t RuntimePeerAsync(void* dst, int dst_device, const void* src, int src_device,
                             size_t count, cudaStream_t stream) {
  auto real = resolve<H, PeerAsyncFn>();
  if (!real) return cudaErrorInitializationError;
  RuntimeHookScope scope;
  std::size_t done =
      offer_peer(dst, dst_device, src, src_device, count, explicit_stream<H>(stream), false);
  if (done == count && count != 0) return cudaSuccess;
  skip_done(dst, src, count, done);
  return real(dst, dst_device, src, src_device, count, stream);
}

// ---- CUDA host memory: the real call, then what it handed out or took back is reported ---------

using HostAllocFn = cudaError_t (*)(void**, size_t, unsigned);
using MallocHostFn = cudaError_t (*)(void**, size_t);
using HostPtrFn = cudaError_t (*)(void*);
using HostRegisterFn = cudaError_t (*)(void*, size_t, unsigned);

template <Runtime H>
cudaError_t RuntimeHostAlloc(void** p, size_t size, unsigned flags) {
  auto real = resolve<H, HostAllocFn>();
  if (!real) return cudaErrorInitializationError;
  RuntimeHookScope scope;  // cudart's own cuMemHostAlloc below is reported here
  cudaError_t r = real(p, size, flags);
  if (r == cudaSuccess && p) Interposer::host_memory_added(*p, size);
  return r;
}

template <Runtime H>
cudaError_t RuntimeMallocHost(void** p, size_t size) {
  auto real = resolve<H, MallocHostFn>();
  if (!real) return cudaErrorInitializationError;
  RuntimeHookScope scope;
  cudaError_t r = real(p, size);
  if (r == cudaSuccess && p) Interposer::host_memory_added(*p, size);
  return r;
}

template <Runtime H>
cudaError_t RuntimeHostRegister(void* p, size_t size, unsigned flags) {
  auto real = resolve<H, HostRegisterFn>();
  if (!real) return cudaErrorInitializationError;
  RuntimeHookScope scope;
  Interposer::host_memory_registering(p, size);
  cudaError_t r = real(p, size, flags);
  if (r == cudaSuccess) Interposer::host_memory_added(p, size);
  return r;
}

// cudaFreeHost and cudaHostUnregister. Forgotten before the memory goes: a copy racing the free
// must not be told it is still there.
template <Runtime H>
cudaError_t RuntimeHostRelease(void* p) {
  auto real = resolve<H, HostPtrFn>();
  if (!real) return cudaErrorInitializationError;
  RuntimeHookScope scope;
  Interposer::host_memory_removed(p);
  return real(p);
}

// ---- waits for the GPU: forwarded, and kept in a recorded trace --------------------------------

using StreamSyncFn = cudaError_t (*)(cudaStream_t);
using DeviceSyncFn = cudaError_t (*)();
using EventSyncFn = cudaError_t (*)(cudaEvent_t);

template <Runtime H, typename Fn, typename... Args>
cudaError_t recorded_wait(std::uintptr_t stream, Args... args) {
  auto real = resolve<H, Fn>();
  if (!real) return cudaErrorInitializationError;
  RuntimeHookScope scope;  // cudart's own cu*Synchronize below is not kept again
  RecordedWait wait(g_entries[static_cast<int>(H)].name, stream);
  const cudaError_t r = real(args...);
  wait.finish(r);
  return r;
}

template <Runtime H>
cudaError_t RuntimeStreamSync(cudaStream_t stream) {
  return recorded_wait<H, StreamSyncFn>(
      reinterpret_cast<std::uintptr_t>(explicit_stream<H>(stream)), stream);
}

template <Runtime H>
cudaError_t RuntimeDeviceSync() {
  return recorded_wait<H, DeviceSyncFn>(0);
}

template <Runtime H>
cudaError_t RuntimeEventSync(cudaEvent_t event) {
  return recorded_wait<H, EventSyncFn>(0, event);
}

}  // namespace
}  // namespace cmt::hooks

// ---- exported names
// ------------------------------------------------------------------------------

#define CMT_EXPORT_RUNTIME_HOOK(name, shape, per_thread) \
  CMT_DEFINE_EXPORT(name, cmt::hooks::shape<cmt::hooks::Runtime::name>, CMT_SHAPE_##shape)
CMT_RUNTIME_HOOKS(CMT_EXPORT_RUNTIME_HOOK)

// Every copy this thread makes from now on goes to CUDA (and every memcpy/memmove to libc)
// untouched (nonzero), or is offered to cmt again (zero); returns the previous setting. For benchmarks that time CUDA's own path and cmt's
// in one process, and for programs that want CUDA's behaviour on one thread.
extern "C" __attribute__((visibility("default"))) int cmt_forward_this_thread(int forward) {
  bool& opted_out = cmt::t_thread.opted_out;
  const bool was = opted_out;
  opted_out = forward != 0;
  return was ? 1 : 0;
}
