#include "interposer/classify.h"

#include <cstdint>

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
    default:
      return "unknown";
  }
}

CopyDecision classify_copy(const DriverApi& driver, void* dst, const void* src, std::size_t bytes,
                           int kind, CUstream stream, Thresholds thresholds) {
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
  Direction direction;
  if ((kind == kHostToDevice || kind == kDefault) && is_pageable(s) && is_device(t)) {
    direction = Direction::HostToDevice;
  } else if ((kind == kDeviceToHost || kind == kDefault) && is_device(s) && is_pageable(t)) {
    direction = Direction::DeviceToHost;
  } else {
    auto pinned_or_managed = [](const PointerInfo& p) {
      return p.memory_type == CU_MEMORYTYPE_HOST || p.managed;
    };
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

}  // namespace cmt
