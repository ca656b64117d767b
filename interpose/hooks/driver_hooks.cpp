#include "hooks/driver_hooks.h"

#include <cuda.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "common/log.h"
#include "common/thread_context.h"
#include "cuda/real_dl.h"
#include "hooks/exported.h"
#include "hooks/held_offer.h"
#include "hooks/hook_shapes.h"
#include "hooks/hook_table.h"
#include "interposer/interposer.h"
#include "interposer/pageable_stand_in.h"
#include "interposer/recorder.h"
#include "interposer/structured_copy.h"


namespace cmt::hooks {
namespace {

// One libcuda entry point that cmt mirrors (a CMT_DRIVER_HOOKS row): its exported name and the
// real function cmt's hook forwards to (the first one handed out, or found by RTLD_NEXT). The
// hooks themselves are in g_hook_functions, at the same index.
struct DriverHook {
  const char* name;
  bool per_thread_default;  // _ptds/_ptsz: a NULL stream is the calling thread's default stream
  std::atomic<void*> real{nullptr};
};

enum class Driver : int { CMT_DRIVER_HOOKS(CMT_HOOK_ENUM) Count };
constexpr int kHookCount = static_cast<int>(Driver::Count);

// Constant-initialized, so it is complete before any code in the process can call a hook.
#define CMT_DRIVER_ENTRY(name, shape, per_thread) {#name, (per_thread) != 0},
DriverHook g_hooks[kHookCount] = {CMT_DRIVER_HOOKS(CMT_DRIVER_ENTRY)};
#undef CMT_DRIVER_ENTRY
extern void* const g_hook_functions[kHookCount];

const char* const kRuntimeHookNames[] = {CMT_RUNTIME_HOOKS(CMT_HOOK_NAME)};

// libcmt.so, which loaded this engine (hooks/engine_link.h): its exports are cmt's too.
std::atomic<FrontAddressTest> g_in_front{nullptr};

// In libcmt-engine.so or in libcmt.so: never a function a hook may forward to.
bool is_ours(const void* p) {
  static const void* self_base = [] {
    Dl_info self{};
    return dladdr(reinterpret_cast<void*>(&is_ours), &self) ? self.dli_fbase : nullptr;
  }();
  const FrontAddressTest in_front = g_in_front.load(std::memory_order_acquire);
  if (in_front && in_front(p)) return true;
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

// The driver's own `name`: the next definition after libcmt.so, else libcuda's if it is loaded.
void* driver_symbol(const char* name) {
  void* fn = next_symbol(name);
  if (!fn) {
    if (void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
      fn = real_dlsym(lib, name);
      dlclose(lib);
    }
  }
  return fn;
}

void* real_of(DriverHook& h) {
  void* fn = h.real.load(std::memory_order_acquire);
  if (fn) return fn;
  // Called directly (the program links libcuda).
  return adopt(h, driver_symbol(h.name)) ? h.real.load(std::memory_order_acquire) : nullptr;
}

template <Driver H>
DriverHook& hook() {
  return g_hooks[static_cast<int>(H)];
}

template <Driver H>
CUstream explicit_stream(CUstream stream) {
  if (stream) return stream;
  return hook<H>().per_thread_default ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

void* as_pointer(CUdeviceptr p) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));
}

// Offers the copy to the engine (unless a runtime hook on this thread already did), then
// forwards whatever it did not handle to the real entry point: `forward(real, bytes_done)`.
template <Driver H, typename Fn, typename Forward>
CUresult take_or_forward(void* dst, const void* src, std::size_t bytes, int kind, CUstream stream,
                         bool synchronous, Forward&& forward) {
  auto real = reinterpret_cast<Fn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (RuntimeHookScope::active()) return forward(real, 0);  // the runtime hook above offered it
  // Recorded from here (interposer/recorder.h): a call under a runtime hook is that hook's.
  RecordedCall record(hook<H>().name, direction_of_kind(kind), host_side_of(dst, src, kind), bytes,
                      explicit_stream<H>(stream));
  CopyCallScope timed;
  const std::size_t done = held_offer([&] {
    return Interposer::offer_copy(dst, src, bytes, kind, explicit_stream<H>(stream), synchronous,
                                  Entry::Driver);
  });
  const CUresult result = done == bytes && bytes != 0 ? CUDA_SUCCESS : forward(real, done);
  record.finish(result, done);
  return result;
}

// ---- the copy shapes' handlers ---------------------------------------------------------------

using HtoDFn = CUresult (*)(CUdeviceptr, const void*, size_t);
using DtoHFn = CUresult (*)(void*, CUdeviceptr, size_t);
using HtoDAsyncFn = CUresult (*)(CUdeviceptr, const void*, size_t, CUstream);
using DtoHAsyncFn = CUresult (*)(void*, CUdeviceptr, size_t, CUstream);
using UnifiedFn = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t);
using UnifiedAsyncFn = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream);

template <Driver H>
CUresult HtoD(CUdeviceptr dst, const void* src, size_t n) {
  return take_or_forward<H, HtoDFn>(
      as_pointer(dst), src, n, kHostToDevice, nullptr, true, [&](HtoDFn real, std::size_t done) {
        return real(dst + done, static_cast<const char*>(src) + done, n - done);
      });
}

template <Driver H>
CUresult DtoH(void* dst, CUdeviceptr src, size_t n) {
  return take_or_forward<H, DtoHFn>(
      dst, as_pointer(src), n, kDeviceToHost, nullptr, true, [&](DtoHFn real, std::size_t done) {
        return real(static_cast<char*>(dst) + done, src + done, n - done);
      });
}

template <Driver H>
CUresult HtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream stream) {
  return take_or_forward<H, HtoDAsyncFn>(
      as_pointer(dst), src, n, kHostToDevice, stream, false,
      [&](HtoDAsyncFn real, std::size_t done) {
        return real(dst + done, static_cast<const char*>(src) + done, n - done, stream);
      });
}

template <Driver H>
CUresult DtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream stream) {
  return take_or_forward<H, DtoHAsyncFn>(dst, as_pointer(src), n, kDeviceToHost, stream, false,
                                         [&](DtoHAsyncFn real, std::size_t done) {
                                           return real(static_cast<char*>(dst) + done, src + done,
                                                       n - done, stream);
                                         });
}

// cuMemcpy: unified addressing, the direction comes from the pointers (cudaMemcpyDefault).
template <Driver H>
CUresult Unified(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return take_or_forward<H, UnifiedFn>(
      as_pointer(dst), as_pointer(src), n, kDefault, nullptr, true,
      [&](UnifiedFn real, std::size_t done) { return real(dst + done, src + done, n - done); });
}

template <Driver H>
CUresult UnifiedAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream) {
  return take_or_forward<H, UnifiedAsyncFn>(as_pointer(dst), as_pointer(src), n, kDefault, stream,
                                            false, [&](UnifiedAsyncFn real, std::size_t done) {
                                              return real(dst + done, src + done, n - done, stream);
                                            });
}

// cuMemcpyDtoD: device to device, on one GPU (forwarded) or two (through the host if they have no
// peer access).
using DtoDFn = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t);
using DtoDAsyncFn = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream);

template <Driver H>
CUresult DtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return take_or_forward<H, DtoDFn>(
      as_pointer(dst), as_pointer(src), n, kDeviceToDevice, nullptr, true,
      [&](DtoDFn real, std::size_t done) { return real(dst + done, src + done, n - done); });
}

template <Driver H>
CUresult DtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream) {
  return take_or_forward<H, DtoDAsyncFn>(as_pointer(dst), as_pointer(src), n, kDeviceToDevice,
                                         stream, false, [&](DtoDAsyncFn real, std::size_t done) {
                                           return real(dst + done, src + done, n - done, stream);
                                         });
}

// cuMemcpyPeer(Async): between two named contexts.
using PeerFn = CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
using PeerAsyncFn = CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);

template <Driver H>
std::size_t offer_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                       size_t n, CUstream stream, bool synchronous) {
  if (RuntimeHookScope::active()) return 0;  // cudaMemcpyPeer's hook offered it already
  PeerCall call = PeerCall::of(dst, src, n, explicit_stream<H>(stream), synchronous);
  call.dst_ctx = dst_ctx;
  call.src_ctx = src_ctx;
  return held_offer([&] { return Interposer::offer_peer_copy(call, Entry::Driver); });
}

template <Driver H>
CUresult Peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n) {
  auto real = reinterpret_cast<PeerFn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  std::size_t done = offer_peer<H>(dst, dst_ctx, src, src_ctx, n, nullptr, true);
  if (done == n && n != 0) return CUDA_SUCCESS;
  return real(dst + done, dst_ctx, src + done, src_ctx, n - done);
}

template <Driver H>
CUresult PeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                   size_t n, CUstream stream) {
  auto real = reinterpret_cast<PeerAsyncFn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  std::size_t done = offer_peer<H>(dst, dst_ctx, src, src_ctx, n, stream, false);
  if (done == n && n != 0) return CUDA_SUCCESS;
  return real(dst + done, dst_ctx, src + done, src_ctx, n - done, stream);
}

// cuMemcpyBatchAsync: each copy offered to cmt, the rest forwarded as one batch (batch_copy.h).
// CUDA 12.8's form also reports which copy failed (failIdx), an index into the program's batch.
using BatchFn = CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*,
                             size_t*, size_t, CUstream);
using BatchV1Fn = CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*,
                               size_t*, size_t, size_t*, CUstream);

// Runs the batch: `forward(call)` sends CUDA a batch in the program's form, the rest or the
// program's own, and returns CUDA's answer; a failed copy's index (`fail_index`, where the form
// has one) is mapped back from the rest to the program's batch. A runtime hook on this thread has
// offered its copy already (cudart's own driver call).
std::size_t batch_bytes(const BatchCall& call) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < call.count; ++i) total += call.sizes[i];
  return total;
}

template <typename Forward>
CUresult batch(const char* api, const BatchCall& call, size_t* fail_index, Forward&& forward) {
  BatchRest rest;
  if (RuntimeHookScope::active() || !batch_is_well_formed(call)) return forward(call);
  // Recorded as one call (interposer/recorder.h): its bytes, and those cmt made.
  const std::size_t total = batch_bytes(call);
  RecordedCall record(api, "?", nullptr, total, call.stream);
  held_offer([&] {
    Interposer::offer_batch(call, &rest);
    return std::size_t{0};
  });
  if (rest.untouched) {
    const CUresult r = forward(call);
    record.finish(r, 0);
    return r;
  }
  if (rest.count() == 0) {
    // cmt made every copy: failIdx as CUDA 12.8 writes it on success (SIZE_MAX, measured on the
    // H200 by tests/failidx.sh), not what the program left there.
    if (fail_index) *fail_index = SIZE_MAX;
    record.finish(CUDA_SUCCESS, total);
    return CUDA_SUCCESS;
  }
  const BatchCall left = rest.as_call(call);
  const CUresult r = forward(left);
  if (fail_index && r != CUDA_SUCCESS && *fail_index < rest.count())
    *fail_index = rest.index[*fail_index];
  record.finish(r, total - batch_bytes(left));
  return r;
}

template <Driver H>
CUresult Batch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
               CUmemcpyAttributes* attrs, size_t* attrs_idxs, size_t num_attrs, CUstream stream) {
  auto real = reinterpret_cast<BatchFn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  return batch(hook<H>().name,
               BatchCall{dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, stream,
                         hook<H>().per_thread_default},
               nullptr, [&](const BatchCall& c) {
                 return real(c.dsts, c.srcs, c.sizes, c.count, c.attrs, c.attrs_idxs, c.num_attrs,
                             stream);
               });
}

template <Driver H>
CUresult BatchV1(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                 CUmemcpyAttributes* attrs, size_t* attrs_idxs, size_t num_attrs,
                 size_t* fail_index, CUstream stream) {
  auto real = reinterpret_cast<BatchV1Fn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  return batch(hook<H>().name,
               BatchCall{dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, stream,
                         hook<H>().per_thread_default},
               fail_index, [&](const BatchCall& c) {
                 return real(c.dsts, c.srcs, c.sizes, c.count, c.attrs, c.attrs_idxs, c.num_attrs,
                             fail_index, stream);
               });
}

// ---- the copies cmt leaves to CUDA: their host pages handed back first, then the real call ----
// (interposer/structured_copy.h). Recorded, so a trace shows what a program copies this way.

// The direction for the record, from which sides may be host memory ("?": both, where unified
// memory leaves it open).
const char* direction_of(const HostSpans& spans) {
  const bool src = spans.side[0].bytes != 0, dst = spans.side[1].bytes != 0;
  return src && dst ? "?" : src ? "h2d" : dst ? "d2h" : "d2d";
}

template <Driver H, typename Fn, typename... Args>
CUresult leave_to_cuda(const HostSpans& spans, std::size_t bytes, CUstream stream,
                       Args... args) {
  auto real = reinterpret_cast<Fn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const HostSpan& host = spans.side[0].bytes ? spans.side[0] : spans.side[1];
  RecordedCall record(hook<H>().name, direction_of(spans), host.p, bytes,
                      explicit_stream<H>(stream));
  for (const HostSpan& side : spans.side)
    if (side.bytes) Interposer::hand_back_to_cuda(side.p, side.bytes);
  const CUresult r = real(args...);
  record.finish(r, 0);
  return r;
}

template <typename Copy>
std::size_t box_bytes(const Copy* c) {
  return c ? c->WidthInBytes * c->Height : 0;
}
template <typename Copy>
std::size_t volume_bytes(const Copy* c) {
  return c ? c->WidthInBytes * c->Height * c->Depth : 0;
}
template <typename Copy>
HostSpans spans_of(const Copy* c) {
  return c ? host_spans(*c) : HostSpans{};
}

template <Driver H>
CUresult Copy2D(const CUDA_MEMCPY2D* c) {
  return leave_to_cuda<H, CUresult (*)(const CUDA_MEMCPY2D*)>(spans_of(c), box_bytes(c), nullptr,
                                                              c);
}
template <Driver H>
CUresult Copy2DAsync(const CUDA_MEMCPY2D* c, CUstream s) {
  return leave_to_cuda<H, CUresult (*)(const CUDA_MEMCPY2D*, CUstream)>(spans_of(c), box_bytes(c),
                                                                        s, c, s);
}
template <Driver H>
CUresult Copy3D(const CUDA_MEMCPY3D* c) {
  return leave_to_cuda<H, CUresult (*)(const CUDA_MEMCPY3D*)>(spans_of(c), volume_bytes(c),
                                                              nullptr, c);
}
template <Driver H>
CUresult Copy3DAsync(const CUDA_MEMCPY3D* c, CUstream s) {
  return leave_to_cuda<H, CUresult (*)(const CUDA_MEMCPY3D*, CUstream)>(
      spans_of(c), volume_bytes(c), s, c, s);
}
template <Driver H>
CUresult Copy3DPeer(const CUDA_MEMCPY3D_PEER* c) {
  return leave_to_cuda<H, CUresult (*)(const CUDA_MEMCPY3D_PEER*)>(spans_of(c), volume_bytes(c),
                                                                   nullptr, c);
}
template <Driver H>
CUresult Copy3DPeerAsync(const CUDA_MEMCPY3D_PEER* c, CUstream s) {
  return leave_to_cuda<H, CUresult (*)(const CUDA_MEMCPY3D_PEER*, CUstream)>(
      spans_of(c), volume_bytes(c), s, c, s);
}

HostSpans one_span(const void* p, std::size_t n, int side) {
  HostSpans spans;
  spans.side[side] = HostSpan{p, p ? n : 0};
  return spans;
}

template <Driver H>
CUresult HtoA(CUarray dst, size_t offset, const void* src, size_t n) {
  return leave_to_cuda<H, CUresult (*)(CUarray, size_t, const void*, size_t)>(
      one_span(src, n, 0), n, nullptr, dst, offset, src, n);
}
template <Driver H>
CUresult AtoH(void* dst, CUarray src, size_t offset, size_t n) {
  return leave_to_cuda<H, CUresult (*)(void*, CUarray, size_t, size_t)>(
      one_span(dst, n, 1), n, nullptr, dst, src, offset, n);
}
template <Driver H>
CUresult HtoAAsync(CUarray dst, size_t offset, const void* src, size_t n, CUstream s) {
  return leave_to_cuda<H, CUresult (*)(CUarray, size_t, const void*, size_t, CUstream)>(
      one_span(src, n, 0), n, s, dst, offset, src, n, s);
}
template <Driver H>
CUresult AtoHAsync(void* dst, CUarray src, size_t offset, size_t n, CUstream s) {
  return leave_to_cuda<H, CUresult (*)(void*, CUarray, size_t, size_t, CUstream)>(
      one_span(dst, n, 1), n, s, dst, src, offset, n, s);
}

// A 3D batch: every operation's host pages handed back, then the batch as the program made it.
void hand_back_batch(size_t count, const CUDA_MEMCPY3D_BATCH_OP* ops) {
  for (size_t i = 0; ops && i < count; ++i)
    for (const HostSpan& side : host_spans(ops[i]).side)
      if (side.bytes) Interposer::hand_back_to_cuda(side.p, side.bytes);
}

template <Driver H>
CUresult Batch3D(size_t count, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags,
                 CUstream s) {
  using Fn = CUresult (*)(size_t, CUDA_MEMCPY3D_BATCH_OP*, unsigned long long, CUstream);
  auto real = reinterpret_cast<Fn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  hand_back_batch(count, ops);
  return real(count, ops, flags, s);
}
template <Driver H>
CUresult Batch3DV1(size_t count, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail_index,
                   unsigned long long flags, CUstream s) {
  using Fn = CUresult (*)(size_t, CUDA_MEMCPY3D_BATCH_OP*, size_t*, unsigned long long, CUstream);
  auto real = reinterpret_cast<Fn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  hand_back_batch(count, ops);
  return real(count, ops, fail_index, flags, s);
}

// ---- CUDA host memory: the real call, then what it handed out or took back is reported -------
// A runtime hook on this thread has reported it already (cudart's own driver call).

using HostAllocFn = CUresult (*)(void**, size_t, unsigned);
using AllocHostFn = CUresult (*)(void**, size_t);
using HostPtrFn = CUresult (*)(void*);
using HostRegisterFn = CUresult (*)(void*, size_t, unsigned);

template <Driver H>
CUresult HostAlloc(void** p, size_t bytes, unsigned flags) {
  auto real = reinterpret_cast<HostAllocFn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(p, bytes, flags);
  if (r == CUDA_SUCCESS && p && !RuntimeHookScope::active()) Interposer::host_memory_added(*p, bytes);
  return r;
}

template <Driver H>
CUresult AllocHost(void** p, size_t bytes) {
  auto real = reinterpret_cast<AllocHostFn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(p, bytes);
  if (r == CUDA_SUCCESS && p && !RuntimeHookScope::active()) Interposer::host_memory_added(*p, bytes);
  return r;
}

template <Driver H>
CUresult HostRegister(void* p, size_t bytes, unsigned flags) {
  auto real = reinterpret_cast<HostRegisterFn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!RuntimeHookScope::active()) Interposer::host_memory_registering(p, bytes);
  CUresult r = real(p, bytes, flags);
  if (r == CUDA_SUCCESS && !RuntimeHookScope::active()) Interposer::host_memory_added(p, bytes);
  return r;
}

// cuMemFreeHost and cuMemHostUnregister: forgotten before the memory goes.
template <Driver H>
CUresult HostRelease(void* p) {
  auto real = reinterpret_cast<HostPtrFn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  Interposer::host_memory_removed(p);
  return real(p);
}

// ---- questions about a host pointer: a page cmt registered answers as pageable memory --------
// CUDA is asked about a stand-in page of cmt's own instead, and addresses in the answer are moved
// back (interposer/pageable_stand_in.h). A registration dropped between the check and the call
// changes nothing: the page is pageable then too.

std::uintptr_t address_of(CUdeviceptr p) { return static_cast<std::uintptr_t>(p); }
const void* host_of(CUdeviceptr p) { return reinterpret_cast<const void*>(address_of(p)); }

template <Driver H>
CUresult PointerAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  auto real = reinterpret_cast<CUresult (*)(void*, CUpointer_attribute, CUdeviceptr)>(
      real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!Interposer::registered_by_cmt(host_of(ptr))) return real(data, attribute, ptr);
  const std::uintptr_t stand_in = pageable_stand_in(address_of(ptr));
  const CUresult r = real(data, attribute, static_cast<CUdeviceptr>(stand_in));
  if (r == CUDA_SUCCESS) move_back_answer(attribute, data, stand_in, address_of(ptr));
  return r;
}

template <Driver H>
CUresult PointerAttributes(unsigned count, CUpointer_attribute* attributes, void** data,
                           CUdeviceptr ptr) {
  auto real = reinterpret_cast<CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr)>(
      real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!Interposer::registered_by_cmt(host_of(ptr))) return real(count, attributes, data, ptr);
  const std::uintptr_t stand_in = pageable_stand_in(address_of(ptr));
  const CUresult r = real(count, attributes, data, static_cast<CUdeviceptr>(stand_in));
  if (r == CUDA_SUCCESS && attributes && data)
    for (unsigned i = 0; i < count; ++i)
      move_back_answer(attributes[i], data[i], stand_in, address_of(ptr));
  return r;
}

template <Driver H>
CUresult HostGetFlags(unsigned* flags, void* p) {
  auto real = reinterpret_cast<CUresult (*)(unsigned*, void*)>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!Interposer::registered_by_cmt(p)) return real(flags, p);
  return real(flags, reinterpret_cast<void*>(pageable_stand_in(reinterpret_cast<std::uintptr_t>(p))));
}

template <Driver H>
CUresult HostGetDevicePointer(CUdeviceptr* device, void* p, unsigned flags) {
  auto real = reinterpret_cast<CUresult (*)(CUdeviceptr*, void*, unsigned)>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!Interposer::registered_by_cmt(p)) return real(device, p, flags);
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t stand_in = pageable_stand_in(at);
  const CUresult r = real(device, reinterpret_cast<void*>(stand_in), flags);
  if (r == CUDA_SUCCESS) move_back_address(device, stand_in, at);
  return r;
}

// ---- waits for the GPU: forwarded, and kept in a recorded trace --------------------------------
// A runtime hook on this thread keeps it already (cudart's own driver call).

template <Driver H, typename Fn, typename... Args>
CUresult recorded_wait(std::uintptr_t stream, Args... args) {
  auto real = reinterpret_cast<Fn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (RuntimeHookScope::active()) return real(args...);
  RecordedWait wait(hook<H>().name, stream);
  const CUresult r = real(args...);
  wait.finish(r);
  return r;
}

template <Driver H>
CUresult StreamSync(CUstream s) {
  return recorded_wait<H, CUresult (*)(CUstream)>(
      reinterpret_cast<std::uintptr_t>(explicit_stream<H>(s)), s);
}

template <Driver H>
CUresult CtxSync() {
  return recorded_wait<H, CUresult (*)()>(0);
}

template <Driver H>
CUresult CtxSyncV2(CUcontext ctx) {
  return recorded_wait<H, CUresult (*)(CUcontext)>(0, ctx);
}

template <Driver H>
CUresult EventSync(CUevent e) {
  return recorded_wait<H, CUresult (*)(CUevent)>(0, e);
}

// ---- the end of a context: cmt lets go of what it made in it --------------------------------
// Before the driver destroys it where the call always does (its resources are freed in it, while
// it lives); after a primary context's release, which ends it only when it was the last.

template <Driver H>
CUresult CtxDestroy(CUcontext ctx) {
  auto real = reinterpret_cast<CUresult (*)(CUcontext)>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx) Interposer::context_ends(ctx, true, hook<H>().name);
  return real(ctx);
}

template <Driver H>
CUresult PrimaryCtxReset(CUdevice dev) {
  auto real = reinterpret_cast<CUresult (*)(CUdevice)>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (CUcontext ctx = Interposer::active_primary_context(dev))
    Interposer::context_ends(ctx, true, hook<H>().name);
  return real(dev);
}

// The CUcontext that stands for a green context, which cmt's state is keyed by (nullptr if the
// driver cannot say).
CUcontext context_of_green(CUgreenCtx green) {
  using FromGreen = CUresult (*)(CUcontext*, CUgreenCtx);
  static const auto from_green = reinterpret_cast<FromGreen>(driver_symbol("cuCtxFromGreenCtx"));
  CUcontext ctx = nullptr;
  if (!green || !from_green || from_green(&ctx, green) != CUDA_SUCCESS) return nullptr;
  return ctx;
}

template <Driver H>
CUresult GreenCtxDestroy(CUgreenCtx green) {
  auto real = reinterpret_cast<CUresult (*)(CUgreenCtx)>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (CUcontext ctx = context_of_green(green)) Interposer::context_ends(ctx, true, hook<H>().name);
  return real(green);
}

template <Driver H>
CUresult PrimaryCtxRelease(CUdevice dev) {
  auto real = reinterpret_cast<CUresult (*)(CUdevice)>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUcontext ctx = Interposer::active_primary_context(dev);
  const CUresult r = real(dev);
  if (r == CUDA_SUCCESS && ctx && !Interposer::active_primary_context(dev))
    Interposer::context_ends(ctx, false, hook<H>().name);
  return r;
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

// The base names cmt hooks a variant of: the copies, the symbol lookup, host memory, the
// questions about a pointer, the waits and the ends of contexts.
bool names_copy_entry(const char* symbol) {
  return symbol &&
         (std::strncmp(symbol, "cuMemcpy", 8) == 0 ||
          std::strcmp(symbol, "cuStreamSynchronize") == 0 ||
          std::strcmp(symbol, "cuCtxSynchronize") == 0 ||
          std::strcmp(symbol, "cuEventSynchronize") == 0 ||
          std::strncmp(symbol, "cuGetProcAddress", 16) == 0 ||
          std::strncmp(symbol, "cuMemHost", 9) == 0 ||
          std::strncmp(symbol, "cuPointerGetAttribute", 21) == 0 ||
          std::strcmp(symbol, "cuMemAllocHost") == 0 || std::strcmp(symbol, "cuMemFreeHost") == 0 ||
          std::strcmp(symbol, "cuCtxDestroy") == 0 ||
          std::strcmp(symbol, "cuDevicePrimaryCtxReset") == 0 ||
          std::strcmp(symbol, "cuDevicePrimaryCtxRelease") == 0 ||
          std::strcmp(symbol, "cuGreenCtxDestroy") == 0);
}

using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t);
using GetProcAddressV2Fn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult*);

template <Driver H>
CUresult GetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  auto real = reinterpret_cast<GetProcAddressFn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && pfn && *pfn && names_copy_entry(symbol)) {
    Interposer::configure();  // its configuration sets the log level
    *pfn = swap_in_hook(symbol, *pfn);
  }
  return r;
}

template <Driver H>
CUresult GetProcAddressV2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status) {
  auto real = reinterpret_cast<GetProcAddressV2Fn>(real_of(hook<H>()));
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && pfn && *pfn && names_copy_entry(symbol)) {
    Interposer::configure();
    *pfn = swap_in_hook(symbol, *pfn);
  }
  return r;
}

#define CMT_DRIVER_HOOK_FUNCTION(name, shape, per_thread) \
  reinterpret_cast<void*>(&HeldHook<&shape<Driver::name>>::call),
void* const g_hook_functions[kHookCount] = {CMT_DRIVER_HOOKS(CMT_DRIVER_HOOK_FUNCTION)};
#undef CMT_DRIVER_HOOK_FUNCTION

int find_hook(const char* name) {
  for (int i = 0; i < kHookCount; ++i)
    if (std::strcmp(g_hooks[i].name, name) == 0) return i;
  return -1;
}

}  // namespace
}  // namespace cmt::hooks

namespace cmt {

bool is_libcmt_address(const void* address) {
  return hooks::is_ours(address);
}

void set_front_address_test(FrontAddressTest in_front) {
  hooks::g_in_front.store(in_front, std::memory_order_release);
}

bool is_hooked_runtime_symbol(const char* name) {
  if (!name || name[0] != 'c' || name[1] != 'u') return false;
  for (const char* n : hooks::kRuntimeHookNames)
    if (std::strcmp(name, n) == 0) return true;
  return false;
}

bool is_hooked_driver_symbol(const char* name) {
  return name && name[0] == 'c' && name[1] == 'u' && hooks::find_hook(name) >= 0;
}

void* driver_hook_for_symbol(const char* name, void* found) {
  int i = name ? hooks::find_hook(name) : -1;
  if (i < 0 || !hooks::adopt(hooks::g_hooks[i], found)) return found;
  return hooks::g_hook_functions[i];
}

}  // namespace cmt

// ---- exported names: programs that link libcuda bind to these ----------------------------------

#define CMT_EXPORT_DRIVER_HOOK(name, shape, per_thread) \
  CMT_DEFINE_EXPORT(name, cmt::hooks::shape<cmt::hooks::Driver::name>, CMT_SHAPE_##shape)
CMT_DRIVER_HOOKS(CMT_EXPORT_DRIVER_HOOK)
