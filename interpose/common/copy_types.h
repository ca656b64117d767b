// The words every room of cmt shares: which way a copy goes, what the engine is asked to do and
// what it answers, and the named choices of the knobs that shape it. Plain data only, so that
// configuration, classification and the engine can all speak of a copy without including each
// other.
#pragma once

#include <cuda.h>

#include <cstddef>

namespace cmt {

enum class Direction { HostToDevice, DeviceToHost };

// cudaMemcpyKind, by value, so that nothing here needs the CUDA runtime's headers.
enum MemcpyKind : int {
  kHostToHost = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
  kDefault = 4,
};

// One pageable-host <-> device copy that cmt has decided to take.
struct CopyRequest {
  Direction direction = Direction::HostToDevice;
  void* host = nullptr;  // pageable: the source of H2D, the destination of D2H
  CUdeviceptr device = 0;
  std::size_t bytes = 0;
  CUstream stream = CU_STREAM_LEGACY;  // explicit: a user stream, CU_STREAM_LEGACY or _PER_THREAD
  bool synchronous = false;            // cudaMemcpy: H2D waits for the stream before copying
  bool no_wait = false;                // forward at once if every lane is busy (no lane wait)
};

struct CopyOutcome {
  // Bytes [0, bytes_done) are handled: staged and their DMAs enqueued (H2D), or in the user's
  // buffer (D2H). The caller forwards the rest to CUDA. `status` says why the engine stopped
  // short (CUDA_SUCCESS when it did not, or when it merely declined to wait).
  std::size_t bytes_done = 0;
  CUresult status = CUDA_SUCCESS;
  // D2H: bytes of the destination that were found never written and prepared (engine/shared/fresh_pages.h).
  std::size_t fresh_bytes = 0;
};

// How CPU threads write a buffer: plain memcpy, or non-temporal (streaming) stores that bypass
// the caches; auto lets the engine choose by direction and size.
enum class CopyMethod { Auto, Memcpy, Streaming };

inline const char* copy_method_name(CopyMethod method) {
  switch (method) {
    case CopyMethod::Memcpy:
      return "memcpy";
    case CopyMethod::Streaming:
      return "streaming";
    default:
      return "auto";
  }
}

// How a device-to-host copy prepares a destination the process has never written
// (engine/shared/fresh_pages.h): transparent huge pages populated on every copy thread, 4 KiB pages
// populated, or nothing.
enum class FreshPages { Off, Populate, Huge };

inline const char* fresh_pages_name(FreshPages mode) {
  switch (mode) {
    case FreshPages::Off:
      return "off";
    case FreshPages::Populate:
      return "populate";
    default:
      return "huge";
  }
}

// Which host-to-host copies (memcpy, memmove) cmt runs on its copy threads (engine/host/host_copier.h):
// none, those into or out of CUDA host memory (a library's own pinned staging), or every large one.
enum class HostCopy { Off, Pinned, All };

inline const char* host_copy_name(HostCopy mode) {
  switch (mode) {
    case HostCopy::Off:
      return "off";
    case HostCopy::All:
      return "all";
    default:
      return "pinned";
  }
}

// Which large memset calls cmt runs on its copy threads (engine/host/host_copier.h): none, those into
// memory never written yet (a new buffer's zero-fill: huge pages, faulted in on every thread),
// or every large one.
enum class HostFill { Off, Fresh, All };

inline const char* host_fill_name(HostFill mode) {
  switch (mode) {
    case HostFill::Off:
      return "off";
    case HostFill::All:
      return "all";
    default:
      return "fresh";
  }
}

// Which cores a GPU's copy threads run on where several GPUs hang off the same ones
// (engine/shared/gpu_locality.h): all of them, shared with the other GPUs' threads, or a share of
// their own.
enum class GpuCores { All, Split };

inline const char* gpu_cores_name(GpuCores mode) {
  return mode == GpuCores::Split ? "split" : "all";
}

}  // namespace cmt
