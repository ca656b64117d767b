#include "interposer/recorder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "common/copy_types.h"
#include "common/log.h"
#include "common/output_file.h"
#include "interposer/host_memory.h"
#include "interposer/interposer.h"
#include "interposer/page_map.h"
#include "interposer/stream_timer.h"

namespace cmt {
namespace {

enum State : int { Unknown, Off, On };
std::atomic<int> g_state{Unknown};
Recorder* g_recorder = nullptr;  // published by g_state = On; never destroyed

// The calls themselves, in slots claimed with one atomic add: recording never allocates and never
// waits, because the host leg records from inside memcpy, which realloc may call holding a malloc
// arena's lock. The slots are mapped once, at start; untouched, they cost address space only.
constexpr std::size_t kMostCalls = std::size_t{1} << 20;
struct Slot {
  CallRecord record;
  std::atomic<bool> ready{false};
  // Its stream times plus one (0: not known; the slots start as zero pages), set by whichever
  // call collects them.
  std::atomic<std::uint64_t> gpu_ns_plus_1{0};
  std::atomic<std::uint64_t> gpu_gap_ns_plus_1{0};
};
Slot* g_slots = nullptr;
std::atomic<std::size_t> g_claimed{0};
// This process's first slot: 0, or in a forked child the parent's count at the fork (the slots
// before it are the parent's calls, left as they are rather than cleared: clearing would copy
// every page of them into each child, up to 128 MiB a fork of a loader's workers).
std::atomic<std::size_t> g_first{0};
std::atomic<bool> g_forked{false};  // a forked child's recorder: it writes only calls of its own
std::atomic<std::uint64_t> g_dropped{0};
// Times the recorded copies on their streams (with gaps); never destroyed.
std::atomic<StreamTimer*> g_timer{nullptr};

// Each timing of a recorded copy whose end has run, into its slot.
void collect_timings(StreamTimer& timer) {
  timer.collect([](const StreamTimer::Timing& t) {
    Recorder::set_gpu_times(static_cast<long>(t.tag), t.ns, t.gap_ns);
  });
}

struct Outcome {
  const char* outcome = nullptr;
  const char* direction = nullptr;
  int lane = -1;
  bool lane_built = false;
  std::int64_t first_dma_ns = -1;
  std::int64_t lane_wait_ns = -1;
  std::uintptr_t host_at = 0;  // note_host's, where it was called once
  int hosts = 0;               // how many times
};
thread_local Outcome t_outcome;

std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// Runs inside the program's exit: nothing may escape it (an exception there ends the process).
void write_at_exit() noexcept {
  try {
    // A forked child that recorded no call of its own leaves no trace (it used no CUDA).
    if (g_forked.load(std::memory_order_acquire) && g_dropped.load() == 0 &&
        std::min(g_claimed.load(std::memory_order_acquire), kMostCalls) ==
            g_first.load(std::memory_order_acquire))
      return;
    if (Recorder* r = Recorder::active()) r->write();
  } catch (...) {
  }
}

HostKind page_kind(const char* page, long page_size) {
  const PageEntry entry = page_entry(page);
  if (!entry.known) return HostKind::Mixed;  // cannot tell
  if (entry.present) return entry.file ? HostKind::FileMapped : HostKind::Resident;
  unsigned char in_core = 0;
  if (mincore(const_cast<char*>(page), static_cast<std::size_t>(page_size), &in_core) == 0 &&
      (in_core & 1))
    return HostKind::FileCached;
  return HostKind::Fresh;
}

}  // namespace

const char* host_kind_name(HostKind kind) {
  switch (kind) {
    case HostKind::None:
      return "-";
    case HostKind::Pinned:
      return "pinned";
    case HostKind::Resident:
      return "resident";
    case HostKind::FileMapped:
      return "file_mapped";
    case HostKind::FileCached:
      return "file_cached";
    case HostKind::Fresh:
      return "fresh";
    case HostKind::Mixed:
      return "mixed";
  }
  return "?";
}

HostKind sample_host_kind(const void* p, std::size_t bytes) {
  if (!p || bytes == 0) return HostKind::None;
  if (cuda_host_memory().overlaps(p, bytes)) return HostKind::Pinned;
  const long page = sysconf(_SC_PAGESIZE);
  const auto first = reinterpret_cast<std::uintptr_t>(p) / page * page;
  const auto last = (reinterpret_cast<std::uintptr_t>(p) + bytes - 1) / page * page;
  const std::size_t pages = (last - first) / page + 1;
  const std::size_t samples = std::min<std::size_t>(16, pages);
  HostKind kind = HostKind::None;
  for (std::size_t i = 0; i < samples; ++i) {
    const std::size_t index = samples == 1 ? 0 : (pages - 1) * i / (samples - 1);
    const HostKind k = page_kind(reinterpret_cast<const char*>(first + index * page), page);
    if (kind == HostKind::None) kind = k;
    if (k != kind) return HostKind::Mixed;
  }
  return kind;
}

Recorder* Recorder::active() noexcept {
  int state = g_state.load(std::memory_order_acquire);
  if (state == Unknown) {
    Interposer::configure();  // its constructor starts the recorder, or says there is none
    int expected = Unknown;
    g_state.compare_exchange_strong(expected, Off, std::memory_order_acq_rel);
    state = g_state.load(std::memory_order_acquire);
  }
  return state == On ? g_recorder : nullptr;
}

void Recorder::start(const std::string& path_pattern) {
  if (path_pattern.empty()) {
    g_state.store(Off, std::memory_order_release);
    return;
  }
  void* slots = mmap(nullptr, kMostCalls * sizeof(Slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (slots == MAP_FAILED) {
    CMT_WARN_ONCE("CMT_RECORD: no memory for the trace; nothing is recorded");
    g_state.store(Off, std::memory_order_release);
    return;
  }
  g_slots = static_cast<Slot*>(slots);  // zero pages: every slot not ready
  g_recorder = new Recorder(path_pattern);
  g_state.store(On, std::memory_order_release);
  std::atexit(write_at_exit);
}

void Recorder::time_on_streams(StreamTimer* timer) noexcept {
  g_timer.store(timer, std::memory_order_release);
}

void Recorder::forget_in_child() noexcept {
  g_timer.store(nullptr, std::memory_order_release);  // the parent's CUDA is not the child's
  if (g_state.load(std::memory_order_acquire) != On) return;
  g_first.store(std::min(g_claimed.load(std::memory_order_relaxed), kMostCalls),
                std::memory_order_release);
  g_forked.store(true, std::memory_order_release);
  g_dropped.store(0, std::memory_order_relaxed);
  try {
    g_recorder->path_ = path_for_this_process(g_recorder->pattern_);
  } catch (...) {  // no memory: this child records nothing rather than write the parent's file
    g_state.store(Off, std::memory_order_release);
  }
}

Recorder* Recorder::started() noexcept {
  return g_state.load(std::memory_order_acquire) == On ? g_recorder : nullptr;
}

long Recorder::add(const CallRecord& record) noexcept {
  const std::size_t i = g_claimed.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMostCalls) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  g_slots[i].record = record;
  g_slots[i].ready.store(true, std::memory_order_release);
  return static_cast<long>(i);
}

void Recorder::set_gpu_times(long slot, std::uint64_t gpu_ns, std::int64_t gap_ns) noexcept {
  if (slot < 0 || static_cast<std::size_t>(slot) >= kMostCalls || !g_slots) return;
  g_slots[slot].gpu_ns_plus_1.store(gpu_ns + 1, std::memory_order_relaxed);
  if (gap_ns >= 0)
    g_slots[slot].gpu_gap_ns_plus_1.store(static_cast<std::uint64_t>(gap_ns) + 1,
                                          std::memory_order_relaxed);
}

std::string Recorder::to_text() const {
  struct Kept {
    CallRecord record;
    long long gpu_ns, gpu_gap_ns;  // -1: not known
  };
  std::vector<Kept> sorted;
  const std::size_t claimed = std::min(g_claimed.load(std::memory_order_acquire), kMostCalls);
  // From this process's first slot; a call still being written at exit is left out.
  for (std::size_t i = g_first.load(std::memory_order_acquire); i < claimed; ++i)
    if (g_slots[i].ready.load(std::memory_order_acquire))
      sorted.push_back(
          {g_slots[i].record,
           static_cast<long long>(g_slots[i].gpu_ns_plus_1.load(std::memory_order_relaxed)) - 1,
           static_cast<long long>(g_slots[i].gpu_gap_ns_plus_1.load(std::memory_order_relaxed)) -
               1});
  std::stable_sort(sorted.begin(), sorted.end(), [](const Kept& a, const Kept& b) {
    return a.record.start_ns < b.record.start_ns;
  });
  char exe[512] = {};
  if (readlink("/proc/self/exe", exe, sizeof exe - 1) < 0) exe[0] = '\0';
  std::string out = "# cmt trace 6 pid=" + std::to_string(getpid()) + " exe=" + exe +
                    " calls=" + std::to_string(sorted.size()) +
                    " dropped=" + std::to_string(g_dropped.load()) + "\n";
  out +=
      "start_ns\tend_ns\ttid\tapi\tdirection\tbytes\ttaken_bytes\toutcome\thost\tstream\tresult"
      "\tlane\tlane_built\tfirst_dma_ns\tlane_wait_ns\thost_at\tgpu_ns\tgpu_gap_ns\n";
  char line[600];
  for (const Kept& kept : sorted) {
    const CallRecord& r = kept.record;
    std::snprintf(
        line, sizeof line,
        "%llu\t%llu\t%d\t%s\t%s\t%llu\t%llu\t%s\t%s\t0x%llx\t%ld\t%d\t%d\t%lld\t%lld\t0x%llx"
        "\t%lld\t%lld\n",
        static_cast<unsigned long long>(r.start_ns), static_cast<unsigned long long>(r.end_ns),
        r.tid, r.api, r.direction, static_cast<unsigned long long>(r.bytes),
        static_cast<unsigned long long>(r.taken_bytes), r.outcome, host_kind_name(r.host),
        static_cast<unsigned long long>(r.stream), r.result, r.lane, r.lane_built ? 1 : 0,
        static_cast<long long>(r.first_dma_ns), static_cast<long long>(r.lane_wait_ns),
        static_cast<unsigned long long>(r.host_at), kept.gpu_ns, kept.gpu_gap_ns);
    out += line;
  }
  return out;
}

void Recorder::write() const {
  std::string why;
  // Private to the user, replacing whatever is at the path, never following it.
  if (!write_output_file(path_, to_text(), &why, 0600))
    CMT_WARN_ONCE("CMT_RECORD: cannot write '{}': {}", path_, why);
}

std::uint64_t record_clock_ns() noexcept {
  return now_ns();
}

void record_host_call(const char* api, std::size_t bytes, std::size_t done,
                      std::uint64_t start_ns) noexcept {
  Recorder* recorder = Recorder::started();
  if (!recorder) return;
  CallRecord r;
  r.api = api;
  r.start_ns = start_ns;
  r.end_ns = now_ns();
  r.bytes = bytes;
  r.taken_bytes = done;
  r.tid = static_cast<int>(gettid());
  r.direction = "h2h";
  r.outcome = done ? "taken" : "libc";  // libc made it all (a fault stopped cmt's threads at once)
  recorder->add(r);
}

RecordedWait::RecordedWait(const char* api, std::uintptr_t stream) noexcept
    : recorder_(Recorder::active()) {
  if (!recorder_) return;
  record_.api = api;
  record_.direction = "wait";
  record_.outcome = "wait";
  record_.stream = stream;
  record_.tid = static_cast<int>(gettid());
  record_.start_ns = now_ns();
}

void RecordedWait::finish(long result) noexcept {
  if (!recorder_) return;
  record_.end_ns = now_ns();
  record_.result = result;
  recorder_->add(record_);
}

const char* direction_of_kind(int kind) {
  switch (kind) {
    case kHostToHost:
      return "h2h";
    case kHostToDevice:
      return "h2d";
    case kDeviceToHost:
      return "d2h";
    case kDeviceToDevice:
      return "d2d";
    default:
      return "?";
  }
}

const void* host_side_of(const void* dst, const void* src, int kind) {
  return kind == kHostToDevice ? src : kind == kDeviceToHost ? dst : nullptr;
}

void note_outcome(const char* outcome, const char* direction) noexcept {
  t_outcome.outcome = outcome;
  if (direction) t_outcome.direction = direction;
}

void note_engine(int lane, bool lane_built, std::int64_t first_dma_ns,
                 std::int64_t lane_wait_ns) noexcept {
  t_outcome.lane = lane;
  t_outcome.lane_built = lane_built;
  // A batch's copies: the first one's delay, the last one's lane, their waits together.
  if (t_outcome.first_dma_ns < 0) t_outcome.first_dma_ns = first_dma_ns;
  if (lane_wait_ns >= 0)
    t_outcome.lane_wait_ns = std::max<std::int64_t>(t_outcome.lane_wait_ns, 0) + lane_wait_ns;
}

void note_host(const void* host) noexcept {
  if (t_outcome.hosts == 0) t_outcome.host_at = reinterpret_cast<std::uintptr_t>(host);
  if (t_outcome.hosts < 2) ++t_outcome.hosts;  // one, or more than one
}

RecordedCall::RecordedCall(const char* api, const char* direction, const void* host,
                           std::size_t bytes, CUstream stream) noexcept
    : recorder_(Recorder::active()) {
  if (!recorder_) return;
  record_.api = api;
  record_.direction = direction;
  record_.bytes = bytes;
  record_.stream = reinterpret_cast<std::uintptr_t>(stream);
  record_.tid = static_cast<int>(gettid());
  record_.host = sample_host_kind(host, bytes);
  record_.host_at = reinterpret_cast<std::uintptr_t>(host);
  t_outcome = Outcome{};
  stream_ = stream;
  if (StreamTimer* timer = g_timer.load(std::memory_order_acquire)) {
    try {
      timing_ = timer->begin(stream);
    } catch (...) {  // a lock that failed: this call is not timed
    }
  }
  record_.start_ns = now_ns();  // after the sampling and the timing's start: the call's own time
}

void RecordedCall::finish(long result, std::size_t taken_bytes) noexcept {
  if (!recorder_) return;
  record_.end_ns = now_ns();
  record_.result = result;
  record_.taken_bytes = taken_bytes;
  // What cmt did with the call as a whole: all of it ("hot" where from a registration of a hot
  // buffer), part of it (CUDA made the rest), or none of it, for the last reason the interposer
  // gave (a batch's last copy's).
  const char* reason = t_outcome.outcome ? t_outcome.outcome : "not_offered";
  const bool hot = std::string_view(reason) == "hot";
  record_.outcome = taken_bytes == record_.bytes && taken_bytes ? (hot ? "hot" : "taken")
                    : taken_bytes                               ? "partial"
                    : std::string_view(reason) == "taken"       ? "stopped"
                                                                : reason;
  if (t_outcome.direction && record_.direction[0] == '?') record_.direction = t_outcome.direction;
  record_.lane = t_outcome.lane;
  record_.lane_built = t_outcome.lane_built;
  record_.first_dma_ns = t_outcome.first_dma_ns;
  record_.lane_wait_ns = t_outcome.lane_wait_ns;
  // A call that did not say which side was the host's (cudaMemcpyDefault), made as one copy.
  if (!record_.host_at && t_outcome.hosts == 1) record_.host_at = t_outcome.host_at;
  const long slot = recorder_->add(record_);
  StreamTimer* timer = g_timer.load(std::memory_order_acquire);
  if (!timer) return;
  try {
    // A timing begun is always ended (a call the trace could not keep: under a tag no slot has).
    if (timing_ >= 0)
      timer->end(timing_, stream_, slot >= 0 ? static_cast<std::uint64_t>(slot) : kMostCalls);
    if (timer->waiting()) collect_timings(*timer);
  } catch (...) {
  }
}

}  // namespace cmt
