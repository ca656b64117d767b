#include "interposer/classify.h"

#include <cstdint>

#include "interposer/register_cache.h"

namespace cmt {
namespace {

struct PointerInfo {
  unsigned memory_type = 0;  // 0: unknown to CUDA, i.e. pageable host memory
  unsigned managed = 0;
  int device = -1;
};

bool query(const DriverApi& driver, const void* ptr, PointerInfo* info) {
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[] = {&info->memory_type, &info->managed, &info->device};
  return driver.pointer_get_attributes(3, attrs, data, reinterpret_cast<CUdeviceptr>(ptr)) ==
         CUDA_SUCCESS;
}

bool is_pageable(const PointerInfo& p) {
  return p.memory_type == 0 && !p.managed;
}
bool is_device(const PointerInfo& p) {
  return p.memory_type == CU_MEMORYTYPE_DEVICE && !p.managed;
}

struct DevicePointer {
  unsigned memory_type = 0, managed = 0;
  int device = -1;
  CUcontext ctx = nullptr;
};

bool query_device_pointer(const DriverApi& driver, CUdeviceptr ptr, DevicePointer* info) {
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_CONTEXT};
  void* data[] = {&info->memory_type, &info->managed, &info->device, &info->ctx};
  return driver.pointer_get_attributes(4, attrs, data, ptr) == CUDA_SUCCESS;
}

// The primary context of device `ordinal`, if it is active.
bool active_primary_context(const DriverApi& driver, int ordinal, CUcontext* ctx) {
  CUdevice dev = 0;
  if (driver.device_get(&dev, ordinal) != CUDA_SUCCESS) return false;
  *ctx = active_primary_context_of(driver, dev);
  return *ctx != nullptr;
}

// The device ordinal of context `ctx`.
bool device_of(const DriverApi& driver, CUcontext ctx, int* ordinal) {
  ScopedContext in(driver, ctx);
  CUdevice dev = -1;
  if (!in.ok() || driver.ctx_get_device(&dev) != CUDA_SUCCESS) return false;
  *ordinal = static_cast<int>(dev);
  return true;
}

// Whether the device of `ctx` (the current context of the call) can reach `ptr`, another GPU's
// memory, directly. Three signs, any one of which says yes: the access flags the driver reports
// for that device; the pointer's device address, which the driver gives only to a context that
// can reach it (NVIDIA's libcu++ asks this way); and, for memory from a pool, the pool's access
// for that device. A failed access-flags query counts as yes: the copy is then CUDA's.
bool can_reach(const DriverApi& driver, CUcontext ctx, CUdeviceptr ptr) {
  ScopedContext in(driver, ctx);
  CUdevice device = -1;
  if (!in.ok() || driver.ctx_get_device(&device) != CUDA_SUCCESS) return true;
  unsigned flags = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
  CUmemoryPool pool = nullptr;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_ACCESS_FLAGS,
                                 CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
  void* data[] = {&flags, &pool};
  if (driver.pointer_get_attributes(2, attrs, data, ptr) != CUDA_SUCCESS ||
      flags != CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE)
    return true;
  CUdeviceptr mapped = 0;
  CUpointer_attribute address = CU_POINTER_ATTRIBUTE_DEVICE_POINTER;
  void* mapped_out = &mapped;
  if (driver.pointer_get_attributes(1, &address, &mapped_out, ptr) == CUDA_SUCCESS) return true;
  if (pool) {
    CUmemAccess_flags pool_flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUmemLocation where{};
    where.type = CU_MEM_LOCATION_TYPE_DEVICE;
    where.id = static_cast<int>(device);
    if (driver.mem_pool_get_access(&pool_flags, pool, &where) != CUDA_SUCCESS ||
        pool_flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
      return true;
  }
  return false;
}

bool inside_one_allocation(const DriverApi& driver, CUdeviceptr p, std::size_t bytes) {
  CUdeviceptr base = 0;
  size_t size = 0;
  return driver.mem_get_address_range(&base, &size, p) == CUDA_SUCCESS && p - base <= size &&
         bytes <= size - (p - base);
}

}  // namespace

const char* forward_reason_name(ForwardReason reason) {
  switch (reason) {
    case ForwardReason::Taken:
      return "taken";
    case ForwardReason::Disabled:
      return "disabled";
    case ForwardReason::BelowThreshold:
      return "below_threshold";
    case ForwardReason::NoContext:
      return "no_context";
    case ForwardReason::KindNotHandled:
      return "kind_not_handled";
    case ForwardReason::PinnedOrManaged:
      return "pinned_or_managed";
    case ForwardReason::NotPageableToDevice:
      return "not_pageable_to_device";
    case ForwardReason::OtherDevice:
      return "other_device";
    case ForwardReason::OutOfRange:
      return "out_of_range";
    case ForwardReason::OtherContextStream:
      return "other_context_stream";
    case ForwardReason::Capturing:
      return "capturing";
    case ForwardReason::DriverError:
      return "driver_error";
    case ForwardReason::EngineUnavailable:
      return "engine_unavailable";
    case ForwardReason::Asleep:
      return "threads_asleep";
    case ForwardReason::LanesBusy:
      return "lanes_busy";
    case ForwardReason::ForkedChild:
      return "forked_child";
    case ForwardReason::NotGpuToGpu:
      return "not_gpu_to_gpu";
    case ForwardReason::SameGpu:
      return "same_gpu";
    case ForwardReason::PeerAccess:
      return "peer_access";
    case ForwardReason::ContextUnsure:
      return "context_unsure";
    default:
      return "unknown";
  }
}

CopyDecision classify_copy(const DriverApi& driver, void* dst, const void* src, std::size_t bytes,
                           int kind, CUstream stream, Thresholds thresholds,
                           const RegisterCache* registered) {
  CopyDecision d;
  if (bytes < thresholds.smallest() || bytes == 0) return {ForwardReason::BelowThreshold, {}};
  if (kind != kHostToDevice && kind != kDeviceToHost && kind != kDefault)
    return {ForwardReason::KindNotHandled, {}};
  if (!dst || !src) return {ForwardReason::NotPageableToDevice, {}};

  CUcontext ctx = nullptr;
  if (driver.ctx_get_current(&ctx) != CUDA_SUCCESS) return {ForwardReason::DriverError, {}};
  if (!ctx) return {ForwardReason::NoContext, {}};

  PointerInfo s, t;
  if (!query(driver, src, &s) || !query(driver, dst, &t)) return {ForwardReason::DriverError, {}};
  // A side whose first page cmt registered is the program's pageable memory: cmt's registration
  // of it, or of a neighbour on that page (the copy's bytes there then go through pinned scratch).
  if (registered) {
    if (s.memory_type == CU_MEMORYTYPE_HOST && !s.managed && registered->touches(src, 1))
      s.memory_type = 0;
    if (t.memory_type == CU_MEMORYTYPE_HOST && !t.managed && registered->touches(dst, 1))
      t.memory_type = 0;
  }
  Direction direction;
  if ((kind == kHostToDevice || kind == kDefault) && is_pageable(s) && is_device(t)) {
    direction = Direction::HostToDevice;
  } else if ((kind == kDeviceToHost || kind == kDefault) && is_device(s) && is_pageable(t)) {
    direction = Direction::DeviceToHost;
  } else {
    auto pinned_or_managed = [](const PointerInfo& p) {
      return p.memory_type == CU_MEMORYTYPE_HOST || p.managed;
    };
    if (kind == kDefault && is_device(s) && is_device(t))
      return {ForwardReason::KindNotHandled, {}, true};
    bool fast_already = pinned_or_managed(s) || pinned_or_managed(t);
    return {fast_already ? ForwardReason::PinnedOrManaged : ForwardReason::NotPageableToDevice, {}};
  }
  if (bytes < (direction == Direction::HostToDevice ? thresholds.h2d : thresholds.d2h))
    return {ForwardReason::BelowThreshold, {}};
  void* host = direction == Direction::HostToDevice ? const_cast<void*>(src) : dst;
  CUdeviceptr device =
      reinterpret_cast<CUdeviceptr>(direction == Direction::HostToDevice ? dst : src);
  const PointerInfo& dev = direction == Direction::HostToDevice ? t : s;

  CUdevice current = -1;
  if (driver.ctx_get_device(&current) != CUDA_SUCCESS) return {ForwardReason::DriverError, {}};
  if (dev.device != static_cast<int>(current)) return {ForwardReason::OtherDevice, {}};

  // The whole device range must lie in one allocation, or CUDA would reject the call before
  // moving a byte, and so must cmt.
  CUdeviceptr base = 0;
  size_t size = 0;
  if (driver.mem_get_address_range(&base, &size, device) != CUDA_SUCCESS)
    return {ForwardReason::OutOfRange, {}};
  if (device - base > size || bytes > size - (device - base))
    return {ForwardReason::OutOfRange, {}};

  if (stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD) {
    CUcontext stream_ctx = nullptr;
    if (driver.stream_get_ctx(stream, &stream_ctx) != CUDA_SUCCESS)
      return {ForwardReason::DriverError, {}};
    if (stream_ctx != ctx) return {ForwardReason::OtherContextStream, {}};
  }
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver.stream_is_capturing(stream, &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return {ForwardReason::Capturing, {}};

  d.reason = ForwardReason::Taken;
  d.request.direction = direction;
  d.request.host = host;
  d.request.device = device;
  d.request.bytes = bytes;
  d.request.stream = stream;
  return d;
}

PeerDecision classify_peer_copy(const DriverApi& driver, const PeerCall& call,
                                std::size_t threshold) {
  PeerDecision d;
  if (call.bytes == 0 || call.bytes < threshold) return {ForwardReason::BelowThreshold, {}};
  if (!call.dst || !call.src) return {ForwardReason::NotGpuToGpu, {}};
  CUcontext caller = nullptr;
  if (driver.ctx_get_current(&caller) != CUDA_SUCCESS) return {ForwardReason::DriverError, {}};
  if (!caller) return {ForwardReason::NoContext, {}};

  DevicePointer s, t;
  if (!query_device_pointer(driver, call.src, &s) || !query_device_pointer(driver, call.dst, &t))
    return {ForwardReason::DriverError, {}};
  auto plain_device = [](const DevicePointer& p) {
    return p.memory_type == CU_MEMORYTYPE_DEVICE && !p.managed;
  };
  if (!plain_device(s) || !plain_device(t)) return {ForwardReason::NotGpuToGpu, {}};
  if (s.device == t.device) return {ForwardReason::SameGpu, {}};
  // The call's devices, if it names them, are the pointers' (else CUDA reports the error).
  if ((call.src_device >= 0 && call.src_device != s.device) ||
      (call.dst_device >= 0 && call.dst_device != t.device))
    return {ForwardReason::OtherDevice, {}};

  // The contexts: the call's, else the allocation's, else the device's primary context.
  auto context_for = [&](CUcontext named, const DevicePointer& p, CUcontext* ctx) {
    if (named) {
      int ordinal = -1;
      *ctx = named;
      return device_of(driver, named, &ordinal) && ordinal == p.device;
    }
    *ctx = p.ctx;
    return *ctx != nullptr || active_primary_context(driver, p.device, ctx);
  };
  CUcontext src_ctx = nullptr, dst_ctx = nullptr;
  if (!context_for(call.src_ctx, s, &src_ctx) || !context_for(call.dst_ctx, t, &dst_ctx))
    return {ForwardReason::OtherDevice, {}};
  if (!inside_one_allocation(driver, call.src, call.bytes) ||
      !inside_one_allocation(driver, call.dst, call.bytes))
    return {ForwardReason::OutOfRange, {}};
  // Peer access either way (the source GPU writing, or the destination reading): CUDA's direct
  // copy beats any path through the host.
  if (can_reach(driver, src_ctx, call.dst) || can_reach(driver, dst_ctx, call.src))
    return {ForwardReason::PeerAccess, {}};

  CUcontext stream_ctx = caller;
  if (call.stream != CU_STREAM_LEGACY && call.stream != CU_STREAM_PER_THREAD &&
      driver.stream_get_ctx(call.stream, &stream_ctx) != CUDA_SUCCESS)
    return {ForwardReason::DriverError, {}};
  // An asynchronous copy is ordered on a stream of one of the two contexts, where cmt can record
  // its events; a synchronous one waits for the caller's default stream wherever it is.
  if (!call.synchronous && stream_ctx != src_ctx && stream_ctx != dst_ctx)
    return {ForwardReason::OtherContextStream, {}};
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver.stream_is_capturing(call.stream, &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return {ForwardReason::Capturing, {}};

  d.reason = ForwardReason::Taken;
  d.request.dst = call.dst;
  d.request.src = call.src;
  d.request.dst_ctx = dst_ctx;
  d.request.src_ctx = src_ctx;
  d.request.bytes = call.bytes;
  d.request.stream = call.stream;
  d.request.stream_ctx = stream_ctx;
  d.request.synchronous = call.synchronous;
  return d;
}

CUcontext active_primary_context_of(const DriverApi& driver, CUdevice dev) {
  unsigned flags = 0;
  int active = 0;
  CUcontext ctx = nullptr;
  if (driver.primary_ctx_get_state(dev, &flags, &active) != CUDA_SUCCESS || !active ||
      driver.primary_ctx_retain(&ctx, dev) != CUDA_SUCCESS)
    return nullptr;
  driver.primary_ctx_release(dev);  // the runtime (or whoever made it active) still holds it
  return ctx;
}

}  // namespace cmt
