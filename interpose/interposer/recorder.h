// The copy recorder (issue 32): with CMT_RECORD=FILE (what `cmt run --record FILE` sets), every
// copy the program asks of CUDA through cmt's hooks, and every call the host leg is offered, is
// kept and written to FILE when the process ends (each %p in FILE becomes the pid): when the call
// began and returned, its size, direction and entry point, its stream, what the host memory was
// (pinned, resident, a file mapping not yet touched...), whether cmt took it or why not, how many
// bytes it took and what the call returned. Programs copy in sequences with work in between; a
// trace shows what they do, which `cmt trace show` summarizes (tuner/trace_file.h) and which a
// replay can reproduce.
//
// The file is text, tab-separated: a header line `# cmt trace 6 pid=... exe=...`, a line naming the
// columns, then one line per call in order of start. (Version 1 had no lane, lane_built and
// first_dma_ns columns, version 2 no lane_wait_ns, version 3 no host_at, version 4 no gpu_ns and
// gpu_gap_ns, version 5 no synchronize calls (RecordedWait); `cmt trace show` reads all six.) Each
// CUDA copy is also timed on its stream (stream_timer.h): how long the stream took from reaching it
// to its end (gpu_ns: what the copy cost a program whose next work waited on the stream, where the
// call may have returned before its last DMA), and how long the stream ran other work, or waited,
// since the end of the copy timed on it before (gpu_gap_ns: the program's kernels between copies,
// which a replay makes the GPU do again); -1 where not known (the process's first copy on a thread,
// before CUDA made a context current; a stream being captured; the last copies, still running when
// the process ended). Recording costs each recorded call a few system calls (the host memory is
// sampled through /proc/self/pagemap and mincore), two event records on its stream and an atomic
// add; a process that does not record pays one load per call. At most 1,048,576 calls are kept.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/output_file.h"

namespace cmt {

// What the host side of a copy was when the call began, from up to 16 sampled pages.
enum class HostKind : unsigned char {
  None,        // no host side (GPU to GPU), or not asked
  Pinned,      // CUDA host memory: cudaHostAlloc'd or registered
  Resident,    // mapped pages that exist: memory the program has used
  FileMapped,  // pages of a file mapping, already mapped in
  FileCached,  // a file mapping not touched yet, its file in the page cache (a fresh safetensors)
  Fresh,       // pages that do not exist yet: new memory, or a file not in the page cache
  Mixed,       // sampled pages of more than one kind
};
const char* host_kind_name(HostKind kind);

// Samples [p, p + bytes): up to 16 pages, evenly spread, in /proc/self/pagemap (does the page exist
// in the process, is it a file's) and, where it does not, mincore (is it in the page cache).
HostKind sample_host_kind(const void* p, std::size_t bytes);

struct CallRecord {
  const char* api = "";  // the entry point's name (static storage)
  std::uint64_t start_ns = 0, end_ns = 0;  // CLOCK_MONOTONIC
  std::uint64_t bytes = 0, taken_bytes = 0;
  std::uintptr_t stream = 0;  // as the call named it (0: the default stream)
  int tid = 0;
  const char* direction = "?";  // h2d, d2h, d2d, h2h, or ? where the call does not say
  // "taken" (all of it), "hot" (all of it, from a registration of a hot buffer), "partial" (cmt
  // stopped short and CUDA made the rest), "stopped" (cmt
  // took it but made no byte), "libc" (a host-leg call libc made), or the reason it was left.
  const char* outcome = "";
  HostKind host = HostKind::None;
  // The host side's address (0: none, or the call does not say which side is the host's): a
  // buffer copied again shows as the same address and size (hot buffers, register_cache.h).
  std::uintptr_t host_at = 0;
  long result = 0;  // what the call returned (a cudaError_t or CUresult; 0 for the host leg)
  // A copy cmt's engine took: the lane it ran on (-1: none), whether the lane's staging ring was
  // made for it, its first DMA's delay from the engine's start of the copy (-1: none), and how
  // long it waited for a lane before that start (-1: not known).
  int lane = -1;
  bool lane_built = false;
  std::int64_t first_dma_ns = -1;
  std::int64_t lane_wait_ns = -1;
};

// The process's recorder.
class Recorder {
 public:
  // The recorder, or null when the process does not record. Reads the configuration on the first
  // call (CMT_RECORD is an environment-only option).
  static Recorder* active() noexcept;
  // Started by the interposer once its configuration is read; written at exit.
  static void start(const std::string& path_pattern);
  // The timer of copies on their streams (made by the interposer once it has the driver; with
  // gaps); without one, no copy is timed.
  static void time_on_streams(class StreamTimer* timer) noexcept;
  // The recorder if started, without reading the configuration: for the host leg, which records
  // from inside memcpy and runs only once the configuration is read.
  static Recorder* started() noexcept;

  // In a forked child (pthread_atfork, one thread): forget the parent's calls and write to this
  // process's file at exit (%p becomes the child's pid), so that a child ending with exit() neither
  // writes the parent's calls again nor replaces the parent's trace.
  static void forget_in_child() noexcept;

  // Keeps `record`; returns its slot (for set_gpu_times), or -1 where the trace is full.
  long add(const CallRecord& record) noexcept;
  // The stream times of the call kept in `slot` (stream_timer.h), once the GPU has run it.
  static void set_gpu_times(long slot, std::uint64_t gpu_ns, std::int64_t gap_ns) noexcept;
  // The trace file's text: header, column names, then the calls sorted by start.
  std::string to_text() const;
  void write() const;

 private:
  explicit Recorder(std::string pattern)
      : pattern_(std::move(pattern)), path_(path_for_this_process(pattern_)) {}
  std::string pattern_;
  std::string path_;
};

// What happened to the copy the calling thread offered last: set by the interposer as it decides
// (Stats::taken and Stats::forwarded; `direction` null where it did not learn it), read back by
// the hook that records the call.
void note_outcome(const char* outcome, const char* direction) noexcept;
// And, for a copy the engine took, what the engine said of it (common/copy_types.h's CopyOutcome).
void note_engine(int lane, bool lane_built, std::int64_t first_dma_ns,
                 std::int64_t lane_wait_ns) noexcept;

// And the host side of a copy it took, where the call did not say which side that was (one
// copy's: a batch of several keeps none).
void note_host(const void* host) noexcept;

// The recorder's clock (CLOCK_MONOTONIC, ns), and a call the host leg took (memcpy, memmove or
// memset: `api`), begun at `start_ns`, of which cmt's threads made `done` bytes. Allocates nothing.
std::uint64_t record_clock_ns() noexcept;
void record_host_call(const char* api, std::size_t bytes, std::size_t done,
                      std::uint64_t start_ns) noexcept;

// A synchronize call the program made (cudaStreamSynchronize, cudaDeviceSynchronize,
// cudaEventSynchronize and the driver's cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize),
// kept as a row of direction "wait" and no bytes: a thread's time between its copies is its own
// work and its waits for the GPU, and a program that waits for each copy (PyTorch's blocking
// `.to()` synchronizes its stream after the copy) is not one whose copies overlap its work. Not
// timed on a stream. Does nothing when the process does not record.
class RecordedWait {
 public:
  RecordedWait(const char* api, std::uintptr_t stream) noexcept;
  void finish(long result) noexcept;

 private:
  Recorder* recorder_;
  CallRecord record_;
};

// A call's direction by its cudaMemcpyKind (common/copy_types.h), "?" for cudaMemcpyDefault; and
// its host side where the kind says which one it is (null otherwise).
const char* direction_of_kind(int kind);
const void* host_side_of(const void* dst, const void* src, int kind);

// One hooked call being recorded, from the hook's entry to its return. Does nothing when the
// process does not record. `host` is the host side where the call says which it is (null
// otherwise): sampled now, before the copy touches it.
class RecordedCall {
 public:
  RecordedCall(const char* api, const char* direction, const void* host, std::size_t bytes,
               CUstream stream) noexcept;
  // The call returned `result` after cmt took `taken_bytes` of it.
  void finish(long result, std::size_t taken_bytes) noexcept;

 private:
  Recorder* recorder_;
  CallRecord record_;
  CUstream stream_ = nullptr;
  int timing_ = -1;  // its stream timing's slot, or -1
};

}  // namespace cmt
