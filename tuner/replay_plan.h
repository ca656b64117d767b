// What `cmt bench replay` (bench/replay_bench.cpp) makes again of a recorded trace
// (trace_file.h), planned without CUDA so that tests can check it: per recorded thread, its host
// <-> device copies in order, each with the CPU work before it, its size, direction, kind of call,
// host memory, where the trace says where host sides were (version 4), which of the program's
// buffers it used, and where it says what the copy's stream did between copies (version 5), the
// GPU work before it: a program's next copy often waits on its stream for kernels, which the CPU
// work alone would not make it wait for.
//
// Host buffers matter to cmt's hot buffers (CMT_REGISTER=hot, interposer/register_cache.h), which
// register a buffer the program copies again and follow up to 4096 ranges at once. A buffer the
// program copied more than once is replayed from one buffer of its own, so that a replay registers
// what the program would have; any other copy from resident memory comes from a place the replay
// has not used for its last kSpreadPlaces such copies, so that it is new to the cache as it was to
// the program, round after round. (A trace older than version 4 does not say: all its resident
// copies use the thread's one buffer, where hot buffers would take them all.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trace_file.h"

namespace cmt::replay {

// Places 64 bytes apart in a thread's resident buffer that copies from buffers the program
// copied once take in turn: twice the ranges the hot-buffer cache follows.
constexpr std::size_t kSpreadPlaces = 8192;
constexpr std::size_t kSpreadStep = 64;

struct Copy {
  std::uint64_t gap_ns = 0;  // CPU work before it (the first: its offset from the window's start)
  std::size_t bytes = 0;
  bool to_device = true;
  bool synchronous = false;  // cudaMemcpy-like: no stream of the thread's own
  std::string host;          // the recorded kind ("resident" for a copy from cmt's registration)
  int buffer = -1;           // the program's buffer it used again (Plan::buffers), or -1
  bool spread = false;       // from a buffer copied once: a place of its own (kSpreadPlaces)
  // The GPU work on its stream between the end of the copy before it on the thread and its start
  // (the recorded stream's gpu_gap_ns), -1: none known (a trace before version 5, or the thread's
  // first copy).
  std::int64_t gpu_gap_ns = -1;
  // Whether the program waited for the GPU after it, before the thread's next copy (a synchronize
  // call on its thread, trace version 6: the replay then synchronizes the copy's stream, and the
  // wait is not part of gap_ns). A trace before version 6 does not say: every copy is waited for.
  bool wait_after = true;
};

struct Thread {
  std::vector<Copy> copies;
  std::size_t most = 0;  // the largest copy
};

struct Plan {
  std::vector<Thread> threads;       // by (process, thread) of the trace
  std::vector<std::size_t> buffers;  // the bytes of each buffer copied more than once
  std::uint64_t bytes = 0;           // of all copies
  bool waits_recorded = false;       // the trace keeps synchronize calls (version 6)
};

// The trace's host <-> device copies made through cudaMemcpy* or cuMemcpy* (not batches) that
// started within [from_ns, to_ns) of its first call.
Plan plan_replay(const Trace& trace, std::uint64_t from_ns, std::uint64_t to_ns);

}  // namespace cmt::replay
