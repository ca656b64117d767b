// Decides whether a copy is one cmt takes: a pageable-host <-> device copy, at or above its
// direction's threshold, on the current context, on a stream that is not capturing a graph.
// Everything else (pinned, registered, managed, device <-> device, host <-> host, unknown pointers,
// another context, graph capture, any driver error) is forwarded untouched, with the reason.
#pragma once

#include <cstddef>

#include "common/copy_types.h"
#include "cuda/driver_api.h"

namespace cmt {

enum class ForwardReason {
  Taken,  // not forwarded
  Disabled,
  BelowThreshold,
  NoContext,            // no current context yet (CUDA initializes it on this call)
  KindNotHandled,       // host <-> host, device <-> device, or an invalid kind
  PinnedOrManaged,      // the host side is pinned, registered or managed: CUDA is already fast
  NotPageableToDevice,  // the pointers do not form a pageable-host <-> device pair
  OtherDevice,          // the device pointer belongs to another device than the current context's
  OutOfRange,           // the device range is not inside one allocation
  OtherContextStream,
  Capturing,  // the stream is capturing a CUDA graph
  DriverError,
  EngineUnavailable,
  Asleep,  // under a threshold, taken only while cmt's copy threads are awake, and they sleep
  LanesBusy,  // a warm copy (under a threshold) found every lane busy with other threads' copies
  ForkedChild,  // a child forked after the process used CUDA: CUDA's own answer
  Count,
};

const char* forward_reason_name(ForwardReason reason);

struct CopyDecision {
  ForwardReason reason = ForwardReason::DriverError;
  CopyRequest request;  // filled when reason == Taken
  bool taken() const { return reason == ForwardReason::Taken; }
};

// The smallest copy taken, each way.
struct Thresholds {
  std::size_t h2d = 0, d2h = 0;
  std::size_t smallest() const { return h2d < d2h ? h2d : d2h; }
};

// `stream` must already be explicit (CU_STREAM_LEGACY / CU_STREAM_PER_THREAD for the default).
CopyDecision classify_copy(const DriverApi& driver, void* dst, const void* src, std::size_t bytes,
                           int kind, CUstream stream, Thresholds thresholds);

}  // namespace cmt
