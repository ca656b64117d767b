// Decides whether a copy is one cmt takes: a pageable-host <-> device copy, at or above its
// direction's threshold, on the current context, on a stream that is not capturing a graph; or a
// copy between two GPUs that have no peer access, which goes through the host (engine/peer/peer_copier.h).
// Everything else (pinned, registered, managed, host <-> host, GPUs with peer access, unknown
// pointers, another context, graph capture, any driver error) is forwarded untouched, with the
// reason.
#pragma once

#include <cstddef>

#include "common/copy_types.h"
#include "cuda/driver_api.h"
#include "engine/peer/peer_copier.h"

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
  Asleep,       // under a threshold, taken only while cmt's copy threads are awake, and they sleep
  LanesBusy,    // a warm copy (under a threshold) found every lane busy with other threads' copies
  ForkedChild,  // a child forked after the process used CUDA: CUDA's own answer
  NotGpuToGpu,  // a device-to-device copy whose pointers are not both plain device memory
  SameGpu,      // both ends on one GPU: CUDA copies within it at its memory's speed
  PeerAccess,   // one GPU can reach the other's memory: CUDA copies directly
  // The context's id could not be read, or another thread is letting go of what cmt held in the
  // context its handle named before (interposer/context_watch.h)
  ContextUnsure,
  Count,
};

const char* forward_reason_name(ForwardReason reason);

// The primary context of `dev` if it is active, else nullptr; never made active here (that would
// take the GPU's memory for a context nobody asked for).
CUcontext active_primary_context_of(const DriverApi& driver, CUdevice dev);

struct CopyDecision {
  ForwardReason reason = ForwardReason::DriverError;
  CopyRequest request;  // filled when reason == Taken
  // Not this path's: both ends are device memory (cuMemcpy, cudaMemcpyDefault), and the peer path
  // decides whether it is a copy between GPUs to take.
  bool for_peer_path = false;
  bool taken() const { return reason == ForwardReason::Taken; }
};

// The smallest copy taken, each way.
struct Thresholds {
  std::size_t h2d = 0, d2h = 0;
  std::size_t smallest() const { return h2d < d2h ? h2d : d2h; }
};

// A device-to-device copy as a hook sees it. The contexts or device ordinals are those the call
// names (cuMemcpyPeer names contexts, cudaMemcpyPeer devices, whose primary contexts are meant);
// those it does not name come from the pointers.
struct PeerCall {
  CUdeviceptr dst = 0, src = 0;
  std::size_t bytes = 0;
  CUcontext dst_ctx = nullptr, src_ctx = nullptr;
  int dst_device = -1, src_device = -1;
  CUstream stream = CU_STREAM_LEGACY;  // explicit, as for classify_copy
  bool synchronous = false;

  // A copy that names neither contexts nor devices (cudaMemcpy, cuMemcpyDtoD); the hooks that
  // name them set them on it.
  static PeerCall of(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream,
                     bool synchronous) {
    PeerCall call;
    call.dst = dst;
    call.src = src;
    call.bytes = bytes;
    call.stream = stream;
    call.synchronous = synchronous;
    return call;
  }
};

struct PeerDecision {
  ForwardReason reason = ForwardReason::DriverError;
  PeerRequest request;  // filled when reason == Taken
  bool taken() const { return reason == ForwardReason::Taken; }
};

// Taken: at least `threshold` bytes between device memory of two GPUs, neither of which can reach
// the other's (asked in each context three ways: the pointer's access flags, its device address,
// its memory pool's access; so whatever enabled access counts, cuCtxEnablePeerAccess or a pool's),
// both ranges inside one allocation, an asynchronous copy's stream in one of the two contexts and
// not capturing a graph.
PeerDecision classify_peer_copy(const DriverApi& driver, const PeerCall& call,
                                std::size_t threshold);

class RegisterCache;

// `stream` must already be explicit (CU_STREAM_LEGACY / CU_STREAM_PER_THREAD for the default).
// With `registered`, host memory on pages that cmt registered (register_cache.h: for the range,
// or for a neighbour sharing a page with it) counts as pageable, as it is to the program.
CopyDecision classify_copy(const DriverApi& driver, void* dst, const void* src, std::size_t bytes,
                           int kind, CUstream stream, Thresholds thresholds,
                           const RegisterCache* registered = nullptr);

}  // namespace cmt
