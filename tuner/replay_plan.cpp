#include "replay_plan.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace cmt::replay {
namespace {

bool replayed(const TraceCall& c) {
  return (c.direction == "h2d" || c.direction == "d2h") && c.bytes != 0 &&
         c.api.rfind("cu", 0) == 0 && c.api.find("Batch") == std::string::npos;
}

// The host memory the replay gives a copy: a copy from cmt's registration of a hot buffer was
// from the program's pageable memory, though sampled as pinned.
std::string host_kind(const TraceCall& c) {
  return c.outcome == "hot" ? "resident" : c.host;
}

// Which kinds the replay makes from the thread's resident buffer (replay_bench.cpp host_side):
// all but CUDA host memory, a file mapping to be read and new anonymous memory.
bool from_resident(const TraceCall& c) {
  const std::string kind = host_kind(c);
  return kind != "pinned" && kind != "fresh" && !(kind == "file_cached" && c.direction == "h2d");
}

using Range = std::tuple<int, std::uint64_t, std::uint64_t>;  // process, host_at, bytes

Range range_of(const TraceCall& c) {
  return {c.process, c.host_at, c.bytes};
}

}  // namespace

Plan plan_replay(const Trace& trace, std::uint64_t from_ns, std::uint64_t to_ns) {
  const std::uint64_t first = (trace.calls.empty() ? 0 : trace.calls.front().start_ns) + from_ns;
  auto in_window = [&](const TraceCall& c) {
    return replayed(c) && c.start_ns >= first && c.start_ns - first < to_ns - from_ns;
  };
  // The program's buffers it copied more than once, from resident memory.
  std::map<Range, int> copies_of, buffer_of;
  const bool addresses = trace.host_addresses;
  for (const TraceCall& c : trace.calls)
    if (addresses && c.host_at && in_window(c) && from_resident(c)) ++copies_of[range_of(c)];
  Plan plan;
  for (const auto& [range, n] : copies_of)
    if (n > 1) {
      buffer_of[range] = static_cast<int>(plan.buffers.size());
      plan.buffers.push_back(std::get<2>(range));
    }
  // Where the trace keeps synchronize calls, the time a thread waited in them after a copy is
  // the replay's own wait (Copy::wait_after), not work before the next copy.
  const std::vector<GapSplit> split =
      trace.waits_recorded ? split_gaps(trace) : std::vector<GapSplit>{};
  std::map<std::pair<int, int>, Thread> by_thread;
  std::map<std::pair<int, int>, std::uint64_t> last_end, last_waited;
  for (std::size_t i = 0; i < trace.calls.size(); ++i) {
    const TraceCall& c = trace.calls[i];
    const auto key = std::make_pair(c.process, c.tid);
    if (!in_window(c)) {
      // A call the replay leaves out (the host leg's, a batch) after one of the thread's copies:
      // the waits that follow it still follow that copy.
      const auto t = by_thread.find(key);
      if (!split.empty() && t != by_thread.end() && !t->second.copies.empty()) {
        t->second.copies.back().wait_after |= split[i].waited_after;
        last_waited[key] += split[i].waited_ns;
      }
      continue;
    }
    auto end = last_end.find(key);
    Copy copy;
    if (end != last_end.end()) copy.gpu_gap_ns = c.gpu_gap_ns;
    copy.gap_ns = end == last_end.end() ? c.start_ns - first
                                        : (c.start_ns > end->second ? c.start_ns - end->second : 0);
    if (end != last_end.end()) copy.gap_ns -= std::min(copy.gap_ns, last_waited[key]);
    if (!split.empty()) copy.wait_after = split[i].waited_after;
    copy.bytes = c.bytes;
    copy.to_device = c.direction == "h2d";
    copy.synchronous = c.api.find("Async") == std::string::npos;
    copy.host = host_kind(c);
    if (addresses && from_resident(c)) {
      const auto own = c.host_at ? buffer_of.find(range_of(c)) : buffer_of.end();
      if (own != buffer_of.end())
        copy.buffer = own->second;
      else
        copy.spread = true;
    }
    Thread& t = by_thread[key];
    t.copies.push_back(copy);
    t.most = std::max(t.most, copy.bytes);
    last_end[key] = c.end_ns;
    last_waited[key] = split.empty() ? 0 : split[i].waited_ns;
    plan.bytes += c.bytes;
  }
  for (auto& [key, t] : by_thread) plan.threads.push_back(std::move(t));
  plan.waits_recorded = trace.waits_recorded;
  return plan;
}

}  // namespace cmt::replay
