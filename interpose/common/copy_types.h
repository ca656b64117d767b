// The words every room of cmt shares: which way a copy goes, what the engine is asked to do and
// what it answers, and the named choices of the knobs that shape it. Plain data only, so that
// configuration, classification and the engine can all speak of a copy without including each
// other.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

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
  // D2H: bytes of the destination that were found never written and prepared
  // (engine/shared/fresh_pages.h).
  std::size_t fresh_bytes = 0;
  // For the record (interposer/recorder.h): which lane of its context and direction the copy ran
  // on (0 first), whether that lane's staging ring was made for it (its first copy, or after a
  // broken one), how long after the engine got the copy its first DMA was enqueued (-1: none),
  // and how long the copy waited for a free lane before that (every lane busy with other copies).
  int lane = -1;
  bool lane_built = false;
  std::int64_t first_dma_ns = -1;
  std::int64_t lane_wait_ns = -1;
  // The copy threads sleep as soon as their copies end, instead of spinning (the gaps between
  // copies have outlasted the spin: WorkerPool::sleeps_between_jobs), after a short bridge; or,
  // every CPU of the machine being taken, at once (WorkerPool::cpus_taken).
  bool threads_sleep_after = false;
  bool threads_asleep_after = false;
};

// A knob's named choices: each enum's names are written once, in its table below (in the order
// messages list them), and everything that parses, prints or lists them reads that table.
template <typename E>
struct Choice {
  E value;
  const char* name;
};
template <typename E>
struct Choices;  // Choices<E>::table, for each knob's enum

// How CPU threads write a buffer: plain memcpy, or non-temporal (streaming) stores that bypass
// the caches; auto lets the engine choose by direction and size.
enum class CopyMethod { Auto, Memcpy, Streaming };
template <>
struct Choices<CopyMethod> {
  static constexpr Choice<CopyMethod> table[] = {{CopyMethod::Auto, "auto"},
                                                 {CopyMethod::Memcpy, "memcpy"},
                                                 {CopyMethod::Streaming, "streaming"}};
};

// How a device-to-host copy prepares a destination the process has never written
// (engine/shared/fresh_pages.h): transparent huge pages populated on every copy thread, 4 KiB
// pages populated, or nothing.
enum class FreshPages { Off, Populate, Huge };
template <>
struct Choices<FreshPages> {
  static constexpr Choice<FreshPages> table[] = {
      {FreshPages::Huge, "huge"}, {FreshPages::Populate, "populate"}, {FreshPages::Off, "off"}};
};

// Which host-to-host copies (memcpy, memmove) cmt runs on its copy threads (interposer/host_leg.h):
// none, those into or out of CUDA host memory (a library's own pinned staging), or every large one.
enum class HostCopy { Off, Pinned, All };
template <>
struct Choices<HostCopy> {
  static constexpr Choice<HostCopy> table[] = {
      {HostCopy::Pinned, "pinned"}, {HostCopy::All, "all"}, {HostCopy::Off, "off"}};
};

// Which file reads (read, pread, readv, preadv, fread of a regular file) cmt reads on its copy
// threads in parallel stretches (interposer/host_leg.h): none, those into CUDA host memory (a
// loader's pinned staging buffer), or those into any memory (a checkpoint reader's new buffer).
enum class HostReads { Off, Pinned, All };
template <>
struct Choices<HostReads> {
  static constexpr Choice<HostReads> table[] = {
      {HostReads::Pinned, "pinned"}, {HostReads::All, "all"}, {HostReads::Off, "off"}};
};

// Which large memset calls cmt runs on its copy threads (interposer/host_leg.h): none, those into
// memory never written yet (a new buffer's zero-fill: huge pages, faulted in on every thread), or
// every large one.
enum class HostFill { Off, Fresh, All };
template <>
struct Choices<HostFill> {
  static constexpr Choice<HostFill> table[] = {
      {HostFill::Fresh, "fresh"}, {HostFill::All, "all"}, {HostFill::Off, "off"}};
};

// Whether cmt registers hot buffers with CUDA (interposer/register_cache.h): never, or a pageable
// range copied again and again (and whose every release cmt sees) once it has been copied
// register_after times.
enum class Register { Off, Hot, Auto };
template <>
struct Choices<Register> {
  static constexpr Choice<Register> table[] = {
      {Register::Off, "off"}, {Register::Hot, "hot"}, {Register::Auto, "auto"}};
};

// Which cores a GPU's copy threads run on where several GPUs hang off the same ones
// (engine/shared/gpu_locality.h): all of them, shared with the other GPUs' threads, or a share of
// their own.
enum class GpuCores { All, Split };
template <>
struct Choices<GpuCores> {
  static constexpr Choice<GpuCores> table[] = {{GpuCores::All, "all"}, {GpuCores::Split, "split"}};
};

// The name of a choice ("?" for a value outside its table).
template <typename E>
constexpr const char* choice_name(E value) {
  for (const Choice<E>& c : Choices<E>::table)
    if (c.value == value) return c.name;
  return "?";
}

}  // namespace cmt
