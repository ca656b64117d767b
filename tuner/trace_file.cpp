#include "trace_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

namespace cmt {
namespace {

// Version 1's columns, version 2's (the engine's lane and first DMA added), version 3's (the
// copy's wait for a lane added), version 4's (the host side's address added) and version 5's (the
// copy's stream times added). Version 6 has version 5's columns, and rows for synchronize calls.
const char* const kColumns1 =
    "start_ns\tend_ns\ttid\tapi\tdirection\tbytes\ttaken_bytes\toutcome\thost\tstream\tresult";
const std::string kColumns2 = std::string(kColumns1) + "\tlane\tlane_built\tfirst_dma_ns";
const std::string kColumns3 = kColumns2 + "\tlane_wait_ns";
const std::string kColumns4 = kColumns3 + "\thost_at";
const std::string kColumns5 = kColumns4 + "\tgpu_ns\tgpu_gap_ns";
constexpr int kNewestVersion = 6;

std::string columns_of(int version) {
  return version == 1   ? std::string(kColumns1)
         : version == 2 ? kColumns2
         : version == 3 ? kColumns3
         : version == 4 ? kColumns4
                        : kColumns5;
}

// Copies smaller than this never make a host buffer hot (register_from's default).
constexpr std::uint64_t kHotFrom = 64u << 10;

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t from = 0;
  for (std::size_t tab; (tab = line.find('\t', from)) != std::string::npos; from = tab + 1)
    fields.push_back(line.substr(from, tab - from));
  fields.push_back(line.substr(from));
  return fields;
}

bool parse_number(const std::string& text, bool is_signed, unsigned long long* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *out = is_signed ? static_cast<unsigned long long>(std::strtoll(text.c_str(), &end, 10))
                   : std::strtoull(text.c_str(), &end, 10);
  return errno == 0 && end && *end == '\0' && (is_signed || text[0] != '-');
}

// The engine's fields of version 2 (three) and 3 (four) into `call`; the empty string, or what
// is wrong.
std::string parse_engine_fields(const std::vector<std::string>& f, int version, TraceCall* call) {
  unsigned long long lane = 0, built = 0, first = 0, wait = static_cast<unsigned long long>(-1);
  if (!parse_number(f[11], true, &lane) || !parse_number(f[12], false, &built) || built > 1 ||
      !parse_number(f[13], true, &first))
    return "fields 12-14 (lane, lane_built, first_dma_ns) are not numbers";
  if (version >= 3 && !parse_number(f[14], true, &wait))
    return "field 15 (lane_wait_ns) is not a number";
  call->lane = static_cast<int>(static_cast<long long>(lane));
  call->lane_built = built == 1;
  call->first_dma_ns = static_cast<std::int64_t>(static_cast<long long>(first));
  call->lane_wait_ns = static_cast<std::int64_t>(static_cast<long long>(wait));
  return {};
}

// An address as the recorder writes it, 0x and hex digits.
bool parse_address(const std::string& text, std::uint64_t* out) {
  if (text.size() < 3 || text.compare(0, 2, "0x") != 0 || text[2] == '-' || text[2] == '+')
    return false;
  char* end = nullptr;
  errno = 0;
  *out = std::strtoull(text.c_str() + 2, &end, 16);
  return errno == 0 && end && *end == '\0';
}

// One call line of a section of `version` into `call`; the empty string, or what is wrong.
std::string parse_call(const std::string& line, int version, TraceCall* call) {
  const std::vector<std::string> f = split_tabs(line);
  const std::size_t fields = version == 1   ? 11
                             : version == 2 ? 14
                             : version == 3 ? 15
                             : version == 4 ? 16
                                            : 18;
  if (f.size() != fields)
    return "expected " + std::to_string(fields) + " tab-separated fields, found " +
           std::to_string(f.size());
  if (version >= 2) {
    const std::string why = parse_engine_fields(f, version, call);
    if (!why.empty()) return why;
  }
  if (version >= 4 && !parse_address(f[15], &call->host_at))
    return "field 16 (host_at, '" + f[15].substr(0, 40) +
           "') is not an address (0x and hex digits)";
  if (version >= 5) {
    unsigned long long gpu = 0, gap = 0;
    if (!parse_number(f[16], true, &gpu) || !parse_number(f[17], true, &gap) ||
        static_cast<long long>(gpu) < -1 || static_cast<long long>(gap) < -1)
      return "fields 17-18 (gpu_ns, gpu_gap_ns) are not -1 or a whole number";
    call->gpu_ns = static_cast<std::int64_t>(static_cast<long long>(gpu));
    call->gpu_gap_ns = static_cast<std::int64_t>(static_cast<long long>(gap));
  }
  unsigned long long v[5] = {};
  const int columns[5] = {0, 1, 2, 5, 6};
  for (int i = 0; i < 5; ++i)
    if (!parse_number(f[columns[i]], false, &v[i]))
      return "field " + std::to_string(columns[i] + 1) + " ('" + f[columns[i]].substr(0, 40) +
             "') is not a whole number";
  unsigned long long result = 0;
  if (!parse_number(f[10], true, &result)) return "field 11 (the result) is not a number";
  if (v[1] < v[0]) return "the call ends before it starts";
  if (v[4] > v[3]) return "more bytes taken than the call had";
  call->start_ns = v[0];
  call->end_ns = v[1];
  call->tid = static_cast<int>(v[2]);
  call->api = f[3];
  call->direction = f[4];
  call->bytes = v[3];
  call->taken_bytes = v[4];
  call->outcome = f[7];
  call->host = f[8];
  call->stream = f[9];
  call->result = static_cast<long>(static_cast<long long>(result));
  return {};
}

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char out[256];
  std::snprintf(out, sizeof out, format, a, b, c);
  return out;
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return fmt(u ? "%.1f " : "%.0f ", bytes) + units[u];
}

std::string size_class(std::uint64_t bytes) {
  if (bytes == 0) return "0";
  int b = 63 - __builtin_clzll(bytes);
  return bytes_text(static_cast<double>(1ull << b)) + "-";
}

double gbps(std::uint64_t bytes, std::uint64_t ns) {
  return ns ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0;
}

std::uint64_t median_of(std::vector<std::uint64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Time spent with exactly k calls in flight, for k = 1.. (index k).
std::vector<std::uint64_t> concurrency_ns(const std::vector<TraceCall>& calls) {
  std::vector<std::pair<std::uint64_t, int>> events;
  for (const TraceCall& c : calls) {
    events.emplace_back(c.start_ns, +1);
    events.emplace_back(c.end_ns, -1);
  }
  std::sort(events.begin(), events.end());
  std::vector<std::uint64_t> at(2, 0);
  int open = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (i && open > 0) {
      if (static_cast<std::size_t>(open) >= at.size()) at.resize(open + 1, 0);
      at[open] += events[i].first - events[i - 1].first;
    }
    open += events[i].second;
  }
  return at;
}

struct Tally {
  std::uint64_t calls = 0, bytes = 0, taken = 0, ns = 0;
  std::vector<std::uint64_t> each_ns;
  void add(const TraceCall& c) {
    ++calls;
    bytes += c.bytes;
    taken += c.taken_bytes;
    ns += c.end_ns - c.start_ns;
    each_ns.push_back(c.end_ns - c.start_ns);
  }
};

std::string overview(const Trace& t) {
  const auto& calls = t.calls;
  std::uint64_t first = calls.front().start_ns, last = 0;
  for (const TraceCall& c : calls) last = std::max(last, c.end_ns);
  const std::uint64_t span = last - first;
  const std::uint64_t busy = in_flight_ns(calls, [](const TraceCall&) { return true; });
  std::string out = "trace: " + std::to_string(t.processes.size()) + " process(es), " +
                    std::to_string(calls.size()) + " calls (" + std::to_string(t.dropped) +
                    " not kept), " + fmt("%.3f s from the first call to the last end\n", span / 1e9);
  for (const std::string& p : t.processes) out += "  " + p + "\n";
  out += fmt("in copies: %.3f s (%.0f%% of the span); between them: %.3f s\n", busy / 1e9,
             span ? 100.0 * busy / span : 0.0, (span - busy) / 1e9);
  const std::vector<std::uint64_t> at = concurrency_ns(calls);
  out += "calls in flight at once (time):";
  for (std::size_t k = 1; k < at.size(); ++k)
    if (at[k]) out += " " + std::to_string(k) + ": " + fmt("%.3f s", at[k] / 1e9);
  return out + "\n";
}

std::string taken_and_forwarded(const Trace& t) {
  Tally taken, hot;
  std::map<std::string, Tally> forwarded;
  for (const TraceCall& c : t.calls) {
    if (c.taken_bytes) taken.add(c);
    if (c.outcome == "hot") hot.add(c);
    if (c.taken_bytes < c.bytes) forwarded[c.outcome].add(c);
  }
  const std::uint64_t together =
      in_flight_ns(t.calls, [](const TraceCall& c) { return c.taken_bytes > 0; });
  std::string out = "taken by cmt: " + std::to_string(taken.calls) + " calls, " +
                    bytes_text(taken.taken) +
                    fmt(", %.1f GB/s per copy (bytes over the sum of their times), %.1f GB/s "
                        "together (over the time any was in flight)\n",
                        gbps(taken.taken, taken.ns), gbps(taken.taken, together));
  if (hot.calls)
    out += "  of which from hot-buffer registrations (register = hot): " +
           std::to_string(hot.calls) + " calls, " + bytes_text(hot.taken) +
           fmt(", %.1f GB/s per copy\n", gbps(hot.taken, hot.ns));
  if (forwarded.empty()) return out;
  out += "left to CUDA or libc (the whole call, or the part cmt did not take), by reason:\n";
  for (const auto& [reason, f] : forwarded)
    // A host-leg call cmt declined is recorded without libc's time, which comes after.
    out += "  " + reason + ": " + std::to_string(f.calls) + " calls, " +
           bytes_text(f.bytes - f.taken) +
           (reason == "libc" ? std::string(" (libc's time is not recorded)\n")
                             : fmt(", %.3f s in the calls (%.1f GB/s)\n", f.ns / 1e9,
                                   gbps(f.bytes - f.taken, f.ns)));
  return out;
}

std::string by_key(const Trace& t, const char* title,
                   std::string (*key)(const TraceCall&)) {
  std::map<std::string, Tally> rows;
  for (const TraceCall& c : t.calls) rows[key(c)].add(c);
  std::string out = std::string(title) + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-28s %8s %12s %12s %11s %9s\n", "", "calls", "bytes",
                "taken", "median us", "GB/s");
  out += line;
  for (const auto& [k, r] : rows) {
    std::snprintf(line, sizeof line, "  %-28s %8llu %12s %12s %11.0f %9.1f\n", k.c_str(),
                  static_cast<unsigned long long>(r.calls), bytes_text(r.bytes).c_str(),
                  bytes_text(r.taken).c_str(), median_of(r.each_ns) / 1e3, gbps(r.bytes, r.ns));
    out += line;
  }
  return out;
}

std::string size_key(const TraceCall& c) {
  return c.direction + " " + size_class(c.bytes);
}

std::string host_key(const TraceCall& c) {
  return c.direction + " " + c.host + (c.taken_bytes ? " taken" : " not taken");
}

// Version 3: how long copies waited for a lane (over 10 us: every lane of their direction busy with other
// copies), and how busy each lane was: the time it held a copy (from the end of the copy's wait to
// the call's return) over the time from its direction's first taken copy to the last one's end.
// A lane idle while copies wait is time lost to handing lanes over.
std::string lane_use(const Trace& t) {
  // Taking a free lane costs a lock, a microsecond or two: a copy that took longer waited.
  constexpr std::int64_t kWaitedNs = 10000;
  std::vector<std::uint64_t> waits;
  std::uint64_t waited_total = 0;
  struct Span {
    std::vector<TraceCall> held;  // [start of work, end) of each copy the lane ran
    std::uint64_t first = ~0ull, last = 0;
  };
  std::map<std::string, Span> lanes;        // "direction lane N (process)"
  std::map<std::string, Span> directions;  // the whole span per direction and process
  for (const TraceCall& c : t.calls) {
    if (!c.taken_bytes || c.lane < 0 || c.lane_wait_ns < 0) continue;
    if (c.lane_wait_ns > kWaitedNs) {
      waits.push_back(static_cast<std::uint64_t>(c.lane_wait_ns));
      waited_total += static_cast<std::uint64_t>(c.lane_wait_ns);
    }
    TraceCall work = c;
    work.start_ns = std::min(c.end_ns, c.start_ns + static_cast<std::uint64_t>(c.lane_wait_ns));
    const std::string where = c.direction + (t.processes.size() > 1
                                                 ? " (process " + std::to_string(c.process) + ")"
                                                 : std::string());
    Span& lane = lanes[where + " lane " + std::to_string(c.lane)];
    lane.held.push_back(work);
    Span& all = directions[where];
    all.first = std::min(all.first, c.start_ns);
    all.last = std::max(all.last, c.end_ns);
  }
  if (lanes.empty()) return {};
  std::string out;
  if (waits.empty()) {
    out = "lane waits: none (a lane was free for every copy)\n";
  } else {
    std::sort(waits.begin(), waits.end());
    out = "lane waits: " + std::to_string(waits.size()) +
          fmt(" copies waited for a free lane, median %.0f us, 90th percentile %.0f us, %.3f s "
              "in all\n",
              waits[waits.size() / 2] / 1e3, waits[waits.size() * 9 / 10] / 1e3,
              waited_total / 1e9);
  }
  out += "lanes busy (holding a copy, of their direction's span):";
  for (auto& [name, lane] : lanes) {
    std::stable_sort(lane.held.begin(), lane.held.end(),
                     [](const TraceCall& a, const TraceCall& b) { return a.start_ns < b.start_ns; });
    const Span& all = directions[name.substr(0, name.find(" lane "))];
    const double span = static_cast<double>(all.last - all.first);
    const double busy = static_cast<double>(in_flight_ns(lane.held, [](const TraceCall&) {
      return true;
    }));
    out += " " + name + fmt(" %.0f%%;", span > 0 ? 100.0 * busy / span : 0.0);
  }
  out.back() = '\n';
  return out;
}

// What the engine said of the copies it took (version 2): how soon each one's first DMA went in,
// on which lanes they ran, and the copies that paid for a lane's staging ring.
std::string engine_side(const Trace& t) {
  std::vector<std::uint64_t> first;
  std::map<int, std::uint64_t> per_lane;
  std::uint64_t built = 0;
  std::int64_t built_wait_ns = 0, built_wait_most_ns = 0;  // the building copies' first DMAs
  for (const TraceCall& c : t.calls) {
    if (!c.taken_bytes || c.lane < 0) continue;
    ++per_lane[c.lane];
    built += c.lane_built;
    if (c.first_dma_ns >= 0) first.push_back(static_cast<std::uint64_t>(c.first_dma_ns));
    if (c.lane_built && c.first_dma_ns >= 0) {
      built_wait_ns += c.first_dma_ns;
      built_wait_most_ns = std::max(built_wait_most_ns, c.first_dma_ns);
    }
  }
  if (per_lane.empty()) return {};
  std::sort(first.begin(), first.end());
  std::string out = "engine: ";
  if (!first.empty())
    out += fmt("the first DMA a median %.0f us after the engine had the copy (90th percentile "
               "%.0f us); ",
               first[first.size() / 2] / 1e3, first[first.size() * 9 / 10] / 1e3);
  out += "copies by lane:";
  for (const auto& [lane, n] : per_lane) out += " " + std::to_string(lane) + ": " + std::to_string(n);
  out += "; " + std::to_string(built) + " made their lane's staging ring";
  // A lane's first copy waits for its ring and threads to be made (tens of ms on a GPU VM): a
  // cost each process pays once per lane, that a short program feels.
  if (built_wait_ns > 0)
    out += fmt(" (their first DMA %.1f ms after the engine had them at most, %.1f ms in all)",
               built_wait_most_ns / 1e6, built_wait_ns / 1e6);
  return out + "\n" + lane_use(t);
}

// Per thread, the time from one call's end to its next call's start: the program's own work.
std::string gaps(const Trace& t) {
  std::map<std::pair<int, int>, std::uint64_t> last_end;
  std::vector<std::uint64_t> gap;
  for (const TraceCall& c : t.calls) {
    auto key = std::make_pair(c.process, c.tid);
    auto it = last_end.find(key);
    if (it != last_end.end() && c.start_ns >= it->second) gap.push_back(c.start_ns - it->second);
    last_end[key] = c.end_ns;
  }
  if (gap.empty()) return "gaps: no thread made two calls\n";
  std::sort(gap.begin(), gap.end());
  std::uint64_t total = 0;
  for (std::uint64_t g : gap) total += g;
  return "gaps on one thread, a call's end to its next start: " + std::to_string(gap.size()) +
         fmt(" gaps, median %.0f us, 90th percentile %.0f us, %.3f s in all\n",
             gap[gap.size() / 2] / 1e3, gap[gap.size() * 9 / 10] / 1e3, total / 1e9);
}

// Version 6: how much of the stretch from the first call to the last end (waits included) no
// thread spent inside a copy, a host-leg call or a synchronize call. No copy, however fast, makes
// the stretch shorter than that: the most cmt could give the program (lab/NOTES.md 84 found a
// loader's own time past what its issue asked of it). An upper bound: a wait may wait for
// kernels, which no copy speed-up shortens.
std::string copy_free_bound(const Trace& t) {
  std::vector<TraceCall> all = t.calls;
  all.insert(all.end(), t.waits.begin(), t.waits.end());
  if (all.empty()) return "";
  std::sort(all.begin(), all.end(),
            [](const TraceCall& a, const TraceCall& b) { return a.start_ns < b.start_ns; });
  std::uint64_t last = 0;
  for (const TraceCall& c : all) last = std::max(last, c.end_ns);
  const std::uint64_t span = last - all.front().start_ns;
  const std::uint64_t free_ns = span - in_flight_ns(all, [](const TraceCall&) { return true; });
  return fmt(
      "  no thread inside a copy, a host-leg call or a synchronize call: %.3f s of the "
      "%.3f s from the first call to the last end; no copy speed-up makes that stretch "
      "shorter (%.2fx at most)\n",
      free_ns / 1e9, span / 1e9,
      free_ns ? static_cast<double>(span) / static_cast<double>(free_ns) : 0.0);
}

// Version 6: the threads' synchronize calls, and how much of their time between copies they
// spent inside them (where a program waits for each copy, pinned's DMA is waited for there).
std::string waits(const Trace& t) {
  if (!t.waits_recorded) return "waits for the GPU: not in the trace (one before version 6)\n";
  std::map<std::string, std::pair<std::size_t, std::uint64_t>> by_api;
  for (const TraceCall& w : t.waits) {
    auto& [n, ns] = by_api[w.api];
    ++n;
    if (w.end_ns > w.start_ns) ns += w.end_ns - w.start_ns;
  }
  std::string out =
      "waits for the GPU (synchronize calls): " + std::to_string(t.waits.size()) + " calls";
  for (const auto& [api, v] : by_api)
    out += ", " + api + " " + std::to_string(v.first) + fmt(" (%.3f s)", v.second / 1e9);
  out += "\n";
  std::uint64_t gap = 0, waited = 0, paid_ns = 0, paid_bytes = 0;
  std::size_t followed = 0;
  const std::vector<GapSplit> split = split_gaps(t);
  for (std::size_t i = 0; i < split.size(); ++i) {
    const GapSplit& g = split[i];
    gap += g.gap_ns;
    waited += g.waited_ns;
    followed += g.waited_after;
    // What a host <-> device copy cost a thread that waits for it: its call and the waits after.
    const TraceCall& c = t.calls[i];
    if ((c.direction == "h2d" || c.direction == "d2h") && c.end_ns >= c.start_ns) {
      paid_ns += c.end_ns - c.start_ns + g.waited_ns;
      paid_bytes += c.bytes;
    }
  }
  return out +
         fmt("  between a thread's copies: %.3f s, of which %.3f s inside synchronize "
             "calls and %.3f s the program's own work;",
             gap / 1e9, waited / 1e9, (gap - waited) / 1e9) +
         " " + std::to_string(followed) + " of " + std::to_string(split.size()) +
         " copies followed by a wait before the thread's next copy\n" +
         "  host <-> device copies "
         "with the waits right after them: " +
         bytes_text(paid_bytes) +
         fmt(" in %.3f s (%.1f GB/s): what they cost a thread that waits for each\n", paid_ns / 1e9,
             gbps(paid_bytes, paid_ns)) +
         copy_free_bound(t);
}

// Version 5: the copies as their streams ran them (stream_timer.h). A call may return before its
// last DMA ends (a cudaMemcpyAsync from pageable memory, staged by cmt or by CUDA), so rates by
// call time can read above the link; the stream's time says what the copy cost work waiting on
// it. And the stream's other work between copies, what a replay makes the GPU do again.
std::string on_streams(const Trace& t) {
  struct Side {
    std::uint64_t calls = 0, bytes = 0, gpu_ns = 0, call_ns = 0;
  };
  std::map<std::string, Side> by;  // pinned, hot, taken (staged by cmt), CUDA's (pageable)
  std::vector<std::uint64_t> gap;
  std::uint64_t gaps_ns = 0;
  for (const TraceCall& c : t.calls) {
    if (c.gpu_gap_ns >= 0) {
      gap.push_back(static_cast<std::uint64_t>(c.gpu_gap_ns));
      gaps_ns += static_cast<std::uint64_t>(c.gpu_gap_ns);
    }
    if (c.gpu_ns < 0 || (c.direction != "h2d" && c.direction != "d2h")) continue;
    Side& s = by[c.host == "pinned"   ? "from CUDA host memory"
                 : c.outcome == "hot" ? "from cmt's registrations"
                 : c.taken_bytes      ? "staged by cmt"
                                      : "CUDA's own path"];
    ++s.calls;
    s.bytes += c.bytes;
    s.gpu_ns += static_cast<std::uint64_t>(c.gpu_ns);
    s.call_ns += c.end_ns - c.start_ns;
  }
  if (by.empty() && gap.empty()) return {};
  std::string out = "on their streams (host <-> device copies timed with events):\n";
  for (const auto& [name, s] : by)
    out += "  " + name + ": " + std::to_string(s.calls) +
           fmt(" copies, %.3f s on the stream (%.1f GB/s), ", s.gpu_ns / 1e9,
               s.gpu_ns ? double(s.bytes) / s.gpu_ns : 0.0) +
           fmt("%.3f s in their calls (%.1f GB/s)\n", s.call_ns / 1e9,
               s.call_ns ? double(s.bytes) / s.call_ns : 0.0);
  if (gap.empty()) return out;
  std::sort(gap.begin(), gap.end());
  return out +
         "  the streams' other work (or idle time) between copies: " + std::to_string(gap.size()) +
         fmt(" gaps, median %.0f us, 90th percentile %.0f us, %.3f s in all\n",
             gap[gap.size() / 2] / 1e3, gap[gap.size() * 9 / 10] / 1e3, gaps_ns / 1e9);
}

// Version 4: how much the program copied again from the same host buffers, which a registration
// of hot buffers (CMT_REGISTER=hot, register_cache.h) would take straight from their pages: the
// pageable host <-> device copies of 64 KiB and up (and those made from cmt's registrations), by
// process, host address and size. The trace sees no frees, so a buffer freed and made again at
// the same address counts as the same one here; cmt's cache starts it afresh.
std::string reuse(const Trace& t) {
  if (!t.host_addresses) return {};
  // Either way: a buffer copied to the GPU and back is one registration.
  std::map<std::tuple<int, std::uint64_t, std::uint64_t>, std::uint64_t> copies;
  Tally all, again, from_third;         // from a range copied before; from its third copy on
  for (const TraceCall& c : t.calls) {  // in order of start
    if ((c.direction != "h2d" && c.direction != "d2h") || !c.host_at || c.bytes < kHotFrom ||
        (c.host == "pinned" && c.outcome != "hot"))
      continue;
    const std::uint64_t n = ++copies[{c.process, c.host_at, c.bytes}];
    all.add(c);
    if (n >= 2) again.add(c);
    if (n >= 3) from_third.add(c);
  }
  const std::string title =
      "host buffers copied again (pageable copies of 64 KiB and up, by host address and size):";
  if (!all.calls) return title + " none\n";
  std::uint64_t twice = 0, ten = 0, hundred = 0, most = 0;
  for (const auto& [range, n] : copies) {
    twice += n >= 2, ten += n >= 10, hundred += n >= 100;
    most = std::max(most, n);
  }
  std::string out = title + "\n  " + std::to_string(all.calls) + " copies of " +
                    std::to_string(copies.size()) + " buffers; " + std::to_string(twice) +
                    " copied twice or more, " + std::to_string(ten) + " 10 times or more, " +
                    std::to_string(hundred) + " 100 times or more (at most " +
                    std::to_string(most) + ")\n";
  auto share = [&](const char* what, const Tally& part) {
    return "  " + std::string(what) + ": " + std::to_string(part.calls) + " copies, " +
           bytes_text(part.bytes) +
           fmt(" (%.0f%% of the bytes), %.3f s in the calls\n",
               all.bytes ? 100.0 * part.bytes / all.bytes : 0.0, part.ns / 1e9);
  };
  out += share("from a buffer copied before", again);
  out += share("from its third copy on", from_third);
  if (from_third.calls)
    out +=
        "  (CMT_REGISTER=hot registers a buffer at its second copy, and auto once its copies "
        "have lost what registering costs, and copies it straight from its pages from then "
        "on)\n";
  return out;
}

}  // namespace

namespace {

// A section's header line, `# cmt trace 4 pid=... exe=... dropped=...`, into a new process;
// the section's version (1 to 6), or 0 with `error` set.
int read_header(const std::string& path, int number, const std::string& line, Trace* trace,
                std::string* error) {
  int version = 0;
  for (int v = 1; v <= kNewestVersion && !version; ++v)
    if (line.rfind("# cmt trace " + std::to_string(v) + " ", 0) == 0) version = v;
  if (!version) {
    *error = path + ":" + std::to_string(number) + ": expected '# cmt trace " +
             std::to_string(kNewestVersion) + " pid=... exe=...' (a file CMT_RECORD wrote)";
    return 0;
  }
  if (version >= 4) trace->host_addresses = true;
  if (version >= 6) trace->waits_recorded = true;
  std::string pid = "?", exe = "?";
  std::istringstream words(line.substr(14));
  for (std::string w; words >> w;) {
    if (w.rfind("pid=", 0) == 0) pid = w.substr(4);
    if (w.rfind("exe=", 0) == 0) exe = w.substr(4);
    if (w.rfind("dropped=", 0) == 0) trace->dropped += std::strtoull(w.c_str() + 8, nullptr, 10);
  }
  trace->processes.push_back("pid " + pid + " " + exe);
  return version;
}

}  // namespace

bool read_trace_file(const std::string& path, Trace* trace, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = path + ": cannot read the trace";
    return false;
  }
  // One section per process: `cmt run --record` puts a whole process tree's in one file.
  std::string line;
  int number = 0, version = 0;
  bool expect_columns = false;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    if (!version || line.rfind("# ", 0) == 0) {
      version = read_header(path, number, line, trace, error);
      if (!version) return false;
      expect_columns = true;
      continue;
    }
    if (expect_columns) {
      const std::string columns = columns_of(version);
      if (line != columns) {
        *error = path + ":" + std::to_string(number) + ": expected the column names '" +
                 columns + "'";
        return false;
      }
      expect_columns = false;
      continue;
    }
    TraceCall call;
    const std::string why = parse_call(line, version, &call);
    if (!why.empty()) {
      *error = path + ":" + std::to_string(number) + ": " + why;
      return false;
    }
    call.process = static_cast<int>(trace->processes.size()) - 1;
    (call.direction == "wait" ? trace->waits : trace->calls).push_back(std::move(call));
  }
  if (!version) {
    *error = path + ": empty, not a trace";
    return false;
  }
  const auto by_start = [](const TraceCall& a, const TraceCall& b) {
    return a.start_ns < b.start_ns;
  };
  std::stable_sort(trace->calls.begin(), trace->calls.end(), by_start);
  std::stable_sort(trace->waits.begin(), trace->waits.end(), by_start);
  return true;
}

std::vector<GapSplit> split_gaps(const Trace& trace) {
  using Key = std::pair<int, int>;
  std::map<Key, std::vector<const TraceCall*>> waits_of;
  for (const TraceCall& w : trace.waits) waits_of[{w.process, w.tid}].push_back(&w);
  std::map<Key, std::vector<std::size_t>> copies_of;
  for (std::size_t i = 0; i < trace.calls.size(); ++i)
    copies_of[{trace.calls[i].process, trace.calls[i].tid}].push_back(i);
  std::vector<GapSplit> split(trace.calls.size());
  for (const auto& [key, copies] : copies_of) {
    const auto found = waits_of.find(key);
    static const std::vector<const TraceCall*> kNone;
    const std::vector<const TraceCall*>& waits = found == waits_of.end() ? kNone : found->second;
    std::size_t w = 0;
    for (std::size_t k = 0; k < copies.size(); ++k) {
      const TraceCall& c = trace.calls[copies[k]];
      const bool last = k + 1 == copies.size();
      const std::uint64_t until = last ? ~std::uint64_t{0} : trace.calls[copies[k + 1]].start_ns;
      GapSplit& g = split[copies[k]];
      if (!last && until > c.end_ns) g.gap_ns = until - c.end_ns;
      while (w < waits.size() && waits[w]->start_ns < c.end_ns) ++w;  // within or before the copy
      for (; w < waits.size() && waits[w]->start_ns < until; ++w) {
        g.waited_after = true;
        const std::uint64_t end = std::min(waits[w]->end_ns, until);
        if (end > waits[w]->start_ns && !last) g.waited_ns += end - waits[w]->start_ns;
      }
      g.waited_ns = std::min(g.waited_ns, g.gap_ns);
    }
  }
  return split;
}

std::string describe_trace(const Trace& trace) {
  if (trace.calls.empty())
    return "trace: " + std::to_string(trace.processes.size()) + " process(es), no copy calls\n";
  return overview(trace) + taken_and_forwarded(trace) + engine_side(trace) +
         by_key(trace, "by direction and size (sizes from the power of two shown):", size_key) +
         by_key(trace, "by direction and host memory:", host_key) + gaps(trace) + waits(trace) +
         on_streams(trace) + reuse(trace);
}

StatsSum sum_of_trace(const Trace& trace) {
  StatsSum sum;
  sum.processes = static_cast<int>(trace.processes.size());
  for (const TraceCall& c : trace.calls) {
    if ((c.direction != "h2d" && c.direction != "d2h") || c.host == "pinned" ||
        c.bytes < (64u << 10) || c.api.rfind("cu", 0) != 0)
      continue;
    StatsSum::Direction& d = c.direction == "h2d" ? sum.h2d : sum.d2h;
    ++d.calls;
    d.bytes += c.bytes;
    d.seconds += (c.end_ns - c.start_ns) / 1e9;
    auto& bucket = d.sizes[std::uint64_t{1} << (63 - __builtin_clzll(c.bytes))];
    ++bucket.first;
    bucket.second += c.bytes;
  }
  return sum;
}

}  // namespace cmt
