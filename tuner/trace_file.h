// Traces that `cmt run --record FILE` writes (interposer/recorder.h: one tab-separated line per
// copy call, and per synchronize call since version 6), read back and summarized for `cmt trace
// show`: how long the program spent in copies and between them (its own work, and its waits for
// the GPU), how many ran at once, what cmt took and at what rate (per copy, and together
// while copies overlapped), sizes, the host memory's kinds, where time went to CUDA's own path
// (the calls forwarded, by reason), and how much was copied again from the same host buffers
// (what hot buffers would take).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stats_files.h"

namespace cmt {

struct TraceCall {
  std::uint64_t start_ns = 0, end_ns = 0;
  int tid = 0;
  std::string api, direction, outcome, host;
  std::uint64_t bytes = 0, taken_bytes = 0;
  std::string stream;
  long result = 0;
  int lane = -1;               // the engine's lane (trace version 2; -1: none, or version 1)
  bool lane_built = false;     // its staging ring made for this copy
  std::int64_t first_dma_ns = -1;  // the first DMA's delay in the engine (-1: none)
  std::int64_t lane_wait_ns = -1;  // its wait for a free lane before that (version 3; -1: none)
  std::uint64_t host_at = 0;       // the host side's address (version 4; 0: none, or not known)
  // On its stream (version 5; -1: not known): from the stream reaching the copy to its end, and
  // from the end of the copy timed before on that stream to this one's start (the program's other
  // work on the stream, or its idle time).
  std::int64_t gpu_ns = -1;
  std::int64_t gpu_gap_ns = -1;
  int process = 0;  // index of the section it came from
};

struct Trace {
  std::vector<std::string> processes;  // "pid exe" of each file read
  std::vector<TraceCall> calls;        // all files' copy calls, sorted by start
  // The synchronize calls (version 6: rows of direction "wait", no bytes), sorted by start: kept
  // apart from the copies, so that every figure about copies reads them alone.
  std::vector<TraceCall> waits;
  std::uint64_t dropped = 0;           // calls the recorder could not keep
  bool host_addresses = false;         // a section (version 4) says where host sides were
  bool waits_recorded = false;         // a section (version 6) keeps synchronize calls
};

// Per thread, the time from each of its copies' end to its next copy's start, and how much of it
// the thread spent inside synchronize calls (Trace::waits): a thread's time between copies is its
// own work and its waits for the GPU. Keyed by (process, tid) and the copy's index in
// Trace::calls; `waited_after` also says whether any wait followed the copy before the next.
struct GapSplit {
  std::uint64_t gap_ns = 0;     // to the thread's next copy (0 for its last)
  std::uint64_t waited_ns = 0;  // of which inside synchronize calls
  bool waited_after = false;    // a synchronize call after the copy, before the thread's next
};
// One entry per call of `trace.calls`, in the same order.
std::vector<GapSplit> split_gaps(const Trace& trace);

// Reads one trace file into `trace` (appending): one section per process, each a header line and
// the column names, then its calls. False with `error` naming the file, the line and what was
// expected.
bool read_trace_file(const std::string& path, Trace* trace, std::string* error);

// The report `cmt trace show` prints.
std::string describe_trace(const Trace& trace);

// The trace's host <-> device copies that cmt could take (pageable host memory, 64 KiB and up,
// whatever this run did with them) as statistics' size histograms: what `cmt tune --trace` tunes
// for (copy_mix.h).
StatsSum sum_of_trace(const Trace& trace);

// The length of the union of the calls' [start, end) intervals that `keep` selects: the time at
// least one of them was in flight.
template <typename Keep>
std::uint64_t in_flight_ns(const std::vector<TraceCall>& sorted_calls, Keep keep) {
  std::uint64_t total = 0, open_start = 0, open_end = 0;
  bool open = false;
  for (const TraceCall& c : sorted_calls) {
    if (!keep(c) || c.end_ns < c.start_ns) continue;
    if (open && c.start_ns <= open_end) {
      if (c.end_ns > open_end) open_end = c.end_ns;
      continue;
    }
    if (open) total += open_end - open_start;
    open = true;
    open_start = c.start_ns;
    open_end = c.end_ns;
  }
  if (open) total += open_end - open_start;
  return total;
}

}  // namespace cmt
