#include "interposer/stats.h"

#include <algorithm>
#include <cstdio>

#include "interposer/host_leg.h"
#include "interposer/register_cache.h"
#include "interposer/recorder.h"

namespace cmt {

std::atomic<std::uint64_t>& Stats::via(Entry entry) {
  return entry == Entry::Runtime ? via_runtime_ : entry == Entry::Driver ? via_driver_ : via_batch_;
}

void Stats::taken(Direction d, Entry entry, std::uint64_t bytes, std::uint64_t nanoseconds) {
  note_outcome("taken", d == Direction::HostToDevice ? "h2d" : "d2h");
  via(entry).fetch_add(1, std::memory_order_relaxed);
  const int dir = d == Direction::HostToDevice ? 0 : 1;
  const int bucket = bytes ? std::min(kBuckets - 1, 63 - __builtin_clzll(bytes)) : 0;
  size_calls_[dir][bucket].fetch_add(1, std::memory_order_relaxed);
  size_bytes_[dir][bucket].fetch_add(bytes, std::memory_order_relaxed);
  PerDirection& p = d == Direction::HostToDevice ? h2d_ : d2h_;
  p.calls.fetch_add(1, std::memory_order_relaxed);
  p.bytes.fetch_add(bytes, std::memory_order_relaxed);
  p.nanoseconds.fetch_add(nanoseconds, std::memory_order_relaxed);
}

void Stats::taken_peer(Entry entry, std::uint64_t bytes, std::uint64_t nanoseconds) {
  note_outcome("taken", "d2d");
  via(entry).fetch_add(1, std::memory_order_relaxed);
  peer_.calls.fetch_add(1, std::memory_order_relaxed);
  peer_.bytes.fetch_add(bytes, std::memory_order_relaxed);
  peer_.nanoseconds.fetch_add(nanoseconds, std::memory_order_relaxed);
}

void Stats::InFlight::enter(std::uint64_t now) {
  std::lock_guard<std::mutex> lk(mu);
  if (active++ == 0) since_ns = now;
}

void Stats::InFlight::leave(std::uint64_t now) {
  std::lock_guard<std::mutex> lk(mu);
  if (active > 0 && --active == 0 && now > since_ns) total_ns += now - since_ns;
}

std::uint64_t Stats::InFlight::ns() {
  std::lock_guard<std::mutex> lk(mu);
  return total_ns;
}

double Stats::in_flight_gbps(std::uint64_t bytes, std::uint64_t ns) {
  return ns ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0;
}

void Stats::copy_started(Direction d, std::uint64_t now_ns) {
  in_flight_[d == Direction::HostToDevice ? 0 : 1].enter(now_ns);
  in_flight_[2].enter(now_ns);
}

void Stats::copy_ended(Direction d, std::uint64_t now_ns) {
  in_flight_[d == Direction::HostToDevice ? 0 : 1].leave(now_ns);
  in_flight_[2].leave(now_ns);
}

void Stats::forwarded(ForwardReason reason, std::uint64_t calls) {
  note_outcome(forward_reason_name(reason), nullptr);
  forwarded_[static_cast<int>(reason)].fetch_add(calls, std::memory_order_relaxed);
}

std::uint64_t Stats::taken_calls() const {
  return h2d_.calls.load(std::memory_order_relaxed) + d2h_.calls.load(std::memory_order_relaxed) +
         peer_.calls.load(std::memory_order_relaxed);
}

std::uint64_t Stats::offered_calls() const {
  std::uint64_t calls = taken_calls();
  for (const auto& n : forwarded_) calls += n.load(std::memory_order_relaxed);
  return calls;
}

// "h2d": [[bucket_low_bytes, calls, bytes], ...], "d2h": [...], non-empty buckets only.
std::string Stats::sizes_json() const {
  std::string out;
  for (int dir = 0; dir < 2; ++dir) {
    out += std::string(dir ? ", " : "") + (dir ? "\"d2h\": [" : "\"h2d\": [");
    bool first = true;
    for (int b = 0; b < kBuckets; ++b) {
      std::uint64_t calls = size_calls_[dir][b].load(std::memory_order_relaxed);
      if (!calls) continue;
      out += std::string(first ? "" : ", ") + "[" + std::to_string(1ull << b) + ", " +
             std::to_string(calls) + ", " +
             std::to_string(size_bytes_[dir][b].load(std::memory_order_relaxed)) + "]";
      first = false;
    }
    out += "]";
  }
  return out;
}

std::string Stats::host_copies_json() {
  HostCopier::Counts c{};
  const HostCopier* copier = host_leg().copier();
  if (copier) c = copier->counts();
  char buf[1024];
  // faults: taken calls a fault stopped, their rest left to libc on the program's thread.
  // unmapped_sources: calls under host_copy_threshold taken because their source's pages were
  // still to be faulted in (of `calls`). reads:
  // file reads into CUDA host memory (read, pread) read on the threads, the bytes they asked for.
  std::snprintf(
      buf, sizeof(buf),
      "{\"armed\": %s, \"calls\": %llu, \"bytes\": %llu, \"seconds\": %.6f, "
      "\"gbps\": %.2f, \"fresh_bytes\": %llu, \"declined_busy\": %llu, "
      "\"faults\": %llu, \"unmapped_sources\": %llu, \"fault_handler_displaced\": %s, "
      "\"fills\": {\"calls\": %llu, \"bytes\": %llu, \"seconds\": %.6f, "
      "\"gbps\": %.2f, \"fresh_bytes\": %llu, \"faults\": %llu}, "
      "\"reads\": {\"calls\": %llu, \"bytes\": %llu, \"seconds\": %.6f, \"gbps\": %.2f, "
      "\"fresh_bytes\": %llu, \"streamed_bytes\": %llu}}",
      copier ? "true" : "false", static_cast<unsigned long long>(c.calls),
      static_cast<unsigned long long>(c.bytes), static_cast<double>(c.ns) / 1e9,
      c.ns ? static_cast<double>(c.bytes) / static_cast<double>(c.ns) : 0.0,
      static_cast<unsigned long long>(c.fresh_bytes), static_cast<unsigned long long>(c.busy),
      static_cast<unsigned long long>(c.faults),
      static_cast<unsigned long long>(host_leg().unmapped_copies()),
      host_leg().handler_displaced() ? "true" : "false",
      static_cast<unsigned long long>(c.fill_calls), static_cast<unsigned long long>(c.fill_bytes),
      static_cast<double>(c.fill_ns) / 1e9,
      c.fill_ns ? static_cast<double>(c.fill_bytes) / static_cast<double>(c.fill_ns) : 0.0,
      static_cast<unsigned long long>(c.fill_fresh_bytes),
      static_cast<unsigned long long>(c.fill_faults), static_cast<unsigned long long>(c.read_calls),
      static_cast<unsigned long long>(c.read_bytes), static_cast<double>(c.read_ns) / 1e9,
      c.read_ns ? static_cast<double>(c.read_bytes) / static_cast<double>(c.read_ns) : 0.0,
      static_cast<unsigned long long>(c.read_fresh_bytes),
      static_cast<unsigned long long>(c.read_streamed_bytes));
  return buf;
}

std::string Stats::register_json() const {
  RegisterCounts c;
  if (register_cache_) c = register_cache_->counts();
  // What registering and copies from registrations cost, as measured so far (register_costs.h:
  // register = auto's estimates; the priors where nothing was measured).
  const RegisterCosts none;
  const RegisterCosts& costs = register_cache_ ? register_cache_->costs() : none;
  const double latency_ns = costs.hot_copy_ns(0);
  const double gib = 1u << 30;
  char buf[1024];
  std::snprintf(
      buf, sizeof buf,
      "{\"on\": %s, \"copies\": %llu, \"bytes\": %llu, \"registrations\": %llu, "
      "\"invalidations\": %llu, \"evictions\": %llu, \"refusals\": %llu, "
      "\"failures\": %llu, \"handed_back\": %llu, \"registered_bytes\": %llu, "
      "\"release_reports\": %llu, \"release_seconds\": %.6f, \"beside_copies\": %llu, "
      "\"beside_bytes\": %llu, \"freed_later\": %llu, \"kept_out\": %llu, "
      "\"estimated_register_ms_per_mib\": %.4f, \"estimated_register_ms_fixed\": %.4f, "
      "\"estimated_hot_gbps\": %.2f, \"estimated_hot_latency_us\": %.2f, "
      "\"staged_copies_timed\": %llu}",
      register_cache_ ? "true" : "false", static_cast<unsigned long long>(hot_calls_.load()),
      static_cast<unsigned long long>(hot_bytes_.load()),
      static_cast<unsigned long long>(c.registrations),
      static_cast<unsigned long long>(c.invalidations),
      static_cast<unsigned long long>(c.evictions), static_cast<unsigned long long>(c.refusals),
      static_cast<unsigned long long>(c.failures), static_cast<unsigned long long>(c.handed_back),
      static_cast<unsigned long long>(c.registered_bytes),
      static_cast<unsigned long long>(c.reports), static_cast<double>(c.report_ns) / 1e9,
      static_cast<unsigned long long>(beside_calls_.load()),
      static_cast<unsigned long long>(beside_bytes_.load()),
      static_cast<unsigned long long>(c.freed_later), static_cast<unsigned long long>(c.kept_out),
      (costs.register_ns(1u << 20) - costs.register_ns(0)) / 1e6, costs.register_ns(0) / 1e6,
      gib / (costs.hot_copy_ns(1u << 30) - latency_ns), latency_ns / 1e3,
      static_cast<unsigned long long>(costs.timed_copies()));
  return buf;
}

std::uint64_t Stats::bytes_taken() const {
  std::uint64_t bytes = h2d_.bytes.load() + d2h_.bytes.load() + peer_.bytes.load();
  if (const HostCopier* copier = host_leg().copier()) {
    const HostCopier::Counts c = copier->counts();
    bytes += c.bytes + c.fill_bytes + c.read_bytes;
  }
  return bytes;
}

namespace {

// CPU seconds per GB of `bytes` (0 when none were taken).
double per_gb(double cpu_s, std::uint64_t bytes) {
  return bytes ? cpu_s / (static_cast<double>(bytes) / 1e9) : 0.0;
}

// The copy threads' CPU time, the bytes cmt took, and the time per GB.
std::string copy_threads_json(double cpu_s, std::uint64_t bytes) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "{\"cpu_seconds\": %.3f, \"bytes_taken\": %llu, \"cpu_seconds_per_gb\": %.3f}",
                cpu_s, static_cast<unsigned long long>(bytes), per_gb(cpu_s, bytes));
  return buf;
}

}  // namespace

std::string Stats::to_json(double copy_threads_cpu_s) const {
  // seconds: the copies' times added up; in_flight_seconds: the time at least one was in the
  // engine, the measure of copies that overlap.
  auto direction = [](const char* name, const PerDirection& p, std::uint64_t in_flight_ns) {
    double bytes = static_cast<double>(p.bytes.load());
    double ns = static_cast<double>(p.nanoseconds.load());
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "\"%s\": {\"calls\": %llu, \"bytes\": %llu, \"seconds\": %.6f, \"gbps\": %.2f, "
                  "\"in_flight_seconds\": %.6f, \"gbps_in_flight\": %.2f}",
                  name, static_cast<unsigned long long>(p.calls.load()),
                  static_cast<unsigned long long>(p.bytes.load()), ns / 1e9,
                  ns > 0 ? bytes / ns : 0.0, static_cast<double>(in_flight_ns) / 1e9,
                  in_flight_gbps(p.bytes.load(), in_flight_ns));
    return std::string(buf);
  };
  const std::uint64_t both = in_flight_[2].ns();
  char together[160];
  std::snprintf(together, sizeof together, "{\"seconds\": %.6f, \"gbps\": %.2f}",
                static_cast<double>(both) / 1e9,
                in_flight_gbps(h2d_.bytes.load() + d2h_.bytes.load(), both));
  std::string out =
      "{\n  \"taken\": {" + direction("h2d", h2d_, in_flight_[0].ns()) + ", " +
      direction("d2h", d2h_, in_flight_[1].ns()) + ", " +
      direction("gpu_to_gpu", peer_, peer_.nanoseconds.load()) +
      "},\n  \"taken_in_flight\": " + together +
      ",\n  \"taken_via\": {\"runtime\": " + std::to_string(via_runtime_.load()) +
      ", \"driver\": " + std::to_string(via_driver_.load()) +
      ", \"batch\": " + std::to_string(via_batch_.load()) + "},\n  \"sizes\": {" + sizes_json() +
      "},\n  \"partial\": " + std::to_string(partial_.load()) +
      ",\n  \"unseen_context_ends\": " + std::to_string(unseen_context_ends_.load()) +
      ",\n  \"fresh_destinations\": {\"calls\": " + std::to_string(fresh_calls_.load()) +
      ", \"bytes\": " + std::to_string(fresh_bytes_.load()) +
      "},\n  \"hot_buffers\": " + register_json() +
      (copy_threads_cpu_s >= 0
           ? ",\n  \"copy_threads\": " + copy_threads_json(copy_threads_cpu_s, bytes_taken())
           : std::string()) +
      ",\n  \"host_copies\": " + host_copies_json() + ",\n  \"forwarded\": {";
  bool first = true;
  for (int i = 1; i < static_cast<int>(ForwardReason::Count); ++i) {
    if (!first) out += ", ";
    first = false;
    out += std::string("\"") + forward_reason_name(static_cast<ForwardReason>(i)) +
           "\": " + std::to_string(forwarded_[i].load());
  }
  out += "}\n}\n";
  return out;
}

std::string Stats::summary(double copy_threads_cpu_s) const {
  auto direction = [](const char* name, const PerDirection& p) {
    double bytes = static_cast<double>(p.bytes.load());
    double ns = static_cast<double>(p.nanoseconds.load());
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s %llu (%.2f GiB, %.1f GB/s)", name,
                  static_cast<unsigned long long>(p.calls.load()), bytes / (1u << 30),
                  ns > 0 ? bytes / ns : 0.0);
    return std::string(buf);
  };
  std::string out = "copies taken: " + direction("H2D", h2d_) + ", " + direction("D2H", d2h_);
  if (const std::uint64_t both = in_flight_[2].ns()) {
    char buf[120];
    std::snprintf(buf, sizeof buf, "; %.1f GB/s over the time copies were in flight (%.3f s)",
                  in_flight_gbps(h2d_.bytes.load() + d2h_.bytes.load(), both),
                  static_cast<double>(both) / 1e9);
    out += buf;
  }
  if (peer_.calls.load()) out += ", " + direction("GPU-to-GPU through the host", peer_);
  if (std::uint64_t n = via_driver_.load())
    out += " (" + std::to_string(n) + " through driver entry points)";
  if (std::uint64_t n = via_batch_.load()) out += " (" + std::to_string(n) + " in batches)";
  if (std::uint64_t n = fresh_calls_.load()) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "; D2H into fresh memory: %llu (%.2f GiB prepared)",
                  static_cast<unsigned long long>(n),
                  static_cast<double>(fresh_bytes_.load()) / (1u << 30));
    out += buf;
  }
  if (register_cache_) {
    const RegisterCounts c = register_cache_->counts();
    char buf[512];  // the text and nine counts of up to 20 digits
    std::snprintf(buf, sizeof buf,
                  "; hot buffers: %llu copies from %llu registrations (%llu dropped on release, "
                  "%llu of them freed later, %llu handed back to CUDA, %llu evicted, %llu "
                  "refused), %llu copies kept out (the bound full of newer ones), %llu small "
                  "copies beside them",
                  static_cast<unsigned long long>(hot_calls_.load()),
                  static_cast<unsigned long long>(c.registrations),
                  static_cast<unsigned long long>(c.invalidations),
                  static_cast<unsigned long long>(c.freed_later),
                  static_cast<unsigned long long>(c.handed_back),
                  static_cast<unsigned long long>(c.evictions),
                  static_cast<unsigned long long>(c.refusals),
                  static_cast<unsigned long long>(c.kept_out),
                  static_cast<unsigned long long>(beside_calls_.load()));
    out += buf;
    if (register_cache_->paid()) {  // what auto's rule weighed the losses against
      const RegisterCosts& costs = register_cache_->costs();
      std::snprintf(buf, sizeof buf,
                    " (auto: registering estimated at %.2f ms + %.3f ms a MiB, copies from a "
                    "registration at %.1f us + %.1f GB/s; %llu other copies timed on their "
                    "streams)",
                    costs.register_ns(0) / 1e6,
                    (costs.register_ns(1u << 20) - costs.register_ns(0)) / 1e6,
                    costs.hot_copy_ns(0) / 1e3,
                    (1u << 30) / (costs.hot_copy_ns(1u << 30) - costs.hot_copy_ns(0)),
                    static_cast<unsigned long long>(costs.timed_copies()));
      out += buf;
    }
  }
  std::string forwards;
  for (int i = 1; i < static_cast<int>(ForwardReason::Count); ++i) {
    std::uint64_t n = forwarded_[i].load();
    if (n)
      forwards += (forwards.empty() ? "" : ", ") +
                  std::string(forward_reason_name(static_cast<ForwardReason>(i))) + " " +
                  std::to_string(n);
  }
  if (const HostCopier* copier = host_leg().copier()) {
    const HostCopier::Counts c = copier->counts();
    char buf[160];
    std::snprintf(buf, sizeof(buf), "; host copies (memcpy/memmove) taken: %llu (%.2f GiB, %.1f GB/s)",
                  static_cast<unsigned long long>(c.calls), static_cast<double>(c.bytes) / (1u << 30),
                  c.ns ? static_cast<double>(c.bytes) / static_cast<double>(c.ns) : 0.0);
    out += buf;
    std::snprintf(buf, sizeof(buf), "; fills (memset) taken: %llu (%.2f GiB, %.1f GB/s)",
                  static_cast<unsigned long long>(c.fill_calls),
                  static_cast<double>(c.fill_bytes) / (1u << 30),
                  c.fill_ns ? static_cast<double>(c.fill_bytes) / static_cast<double>(c.fill_ns)
                            : 0.0);
    out += buf;
  }
  if (copy_threads_cpu_s >= 0) {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "; cmt's copy threads: %.2f CPU s (%.2f s per GB taken)",
                  copy_threads_cpu_s, per_gb(copy_threads_cpu_s, bytes_taken()));
    out += buf;
  }
  out += "; forwarded to CUDA: " + (forwards.empty() ? std::string("none") : forwards);
  if (std::uint64_t p = partial_.load())
    out += "; finished by CUDA after a stop: " + std::to_string(p);
  if (std::uint64_t n = unseen_context_ends_.load())
    out += "; contexts found ended where cmt did not see them: " + std::to_string(n);
  return out;
}

}  // namespace cmt
