#include "engine/host/host_copier.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/thread_context.h"
#include "engine/shared/cpu_copy.h"
#include "engine/shared/fault_guard.h"
#include "engine/shared/fresh_pages.h"
#include "engine/shared/worker_pool.h"

namespace cmt {
namespace {

// A unit is at least this long: below it, handing work to another core costs more than it saves.
constexpr std::size_t kMinUnit = 256u << 10;
constexpr std::size_t kAlign = 64;
// From this size on, the destination is written with streaming stores: it would not stay in the
// caches anyway, and they spare reading each line before writing it. Smaller copies keep their
// destination cached for whoever reads it next.
constexpr std::size_t kStreamFrom = 8u << 20;

}  // namespace

// One copy (src set) or fill (src null: memset with `value`) cut into units, each run by one
// thread under a fault guard.
class HostCopier::Job final : public UnitTask {
 public:
  Job(char* dst, const char* src, int value, std::size_t bytes, std::size_t unit)
      : dst_(dst), src_(src), value_(value), bytes_(bytes), unit_(unit),
        streaming_(bytes >= kStreamFrom) {}
  std::size_t units() const { return (bytes_ + unit_ - 1) / unit_; }
  void run_unit(std::size_t i) override {
    Piece piece{this, i * unit_, std::min(unit_, bytes_ - i * unit_)};
    if (!run_fault_guarded(&Job::move, &piece)) {
      std::size_t first = first_fault_.load(std::memory_order_relaxed);
      while (i < first && !first_fault_.compare_exchange_weak(first, i)) {
      }
    }
  }
  // The leading bytes done: all, or those before the first unit a fault stopped.
  std::size_t done() const {
    const std::size_t first = first_fault_.load(std::memory_order_acquire);
    return first == kNone ? bytes_ : first * unit_;
  }

 private:
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  struct Piece {
    const Job* job;
    std::size_t off, n;
  };
  // The guarded part: nothing here may hold a resource, a fault jumps out of the middle of it.
  static void move(void* arg) {
    const Piece& p = *static_cast<const Piece*>(arg);
    const Job& j = *p.job;
    if (!j.src_)
      std::memset(j.dst_ + p.off, j.value_, p.n);  // libc's: this is cmt's own code
    else if (j.streaming_)
      copy_streaming(j.dst_ + p.off, j.src_ + p.off, p.n);
    else
      copy_memcpy(j.dst_ + p.off, j.src_ + p.off, p.n);
  }

  char* dst_;
  const char* src_;
  int value_;
  std::size_t bytes_, unit_;
  bool streaming_;
  std::atomic<std::size_t> first_fault_{kNone};
};

namespace {
// About four units per thread (the issuer helps), so a slow core does not hold the end up.
std::size_t unit_for(std::size_t bytes, std::size_t threads) {
  std::size_t unit = std::max(kMinUnit, bytes / (threads * 4));
  return (unit + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

HostCopier::HostCopier(const Config& config, unsigned threads, const std::vector<int>& cpus)
    : fresh_pages_(config.fresh_pages),
      pool_(std::make_unique<WorkerPool>(std::max(1u, threads), cpus,
                                         std::chrono::microseconds(config.spin_us),
                                         FaultSignals::Delivered)) {}

HostCopier::~HostCopier() = default;

unsigned HostCopier::threads() const {
  return pool_->size();
}

std::size_t HostCopier::run(Job& job, void* dst, std::size_t bytes, Tally& tally) noexcept {
  const auto t0 = std::chrono::steady_clock::now();
  bool expected = false;
  if (!busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    declined_busy_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  InsideCmt inside;  // the issuer's own memcpy calls while it helps are libc's
  WorkQueue& pool = pool_->queue();
  pool.wake();
  Backoff backoff;
  auto run_units = [&](UnitTask* task, std::size_t units) {
    pool.begin(task);
    pool.publish(units);
    while (pool.finished() < units)
      if (!pool.help()) backoff.pause();
    pool.end();
  };
  // A destination never written yet (a new buffer): huge pages, faulted in on every thread.
  const FreshBlocks fresh = find_fresh(fresh_pages_, dst, bytes);
  if (fresh.count) {
    if (fresh_pages_ == FreshPages::Huge) advise_huge_pages(fresh);
    PopulateFresh populate(fresh);
    run_units(&populate, fresh.count);
    tally.fresh_bytes.fetch_add(fresh.count * kFreshBlock, std::memory_order_relaxed);
  }
  run_units(&job, job.units());
  busy_.store(false, std::memory_order_release);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
  tally.calls.fetch_add(1, std::memory_order_relaxed);
  tally.bytes.fetch_add(bytes, std::memory_order_relaxed);
  tally.ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
  const std::size_t done = job.done();
  if (done < bytes) tally.faults.fetch_add(1, std::memory_order_relaxed);
  return done;
}

std::size_t HostCopier::copy(void* dst, const void* src, std::size_t bytes) noexcept {
  Job job(static_cast<char*>(dst), static_cast<const char*>(src), 0, bytes,
          unit_for(bytes, pool_->size() + 1));
  return run(job, dst, bytes, copies_);
}

std::size_t HostCopier::fill(void* dst, int value, std::size_t bytes) noexcept {
  Job job(static_cast<char*>(dst), nullptr, value, bytes, unit_for(bytes, pool_->size() + 1));
  return run(job, dst, bytes, fills_);
}

HostCopier::Counts HostCopier::counts() const {
  return {copies_.calls.load(),      copies_.bytes.load(), copies_.ns.load(),
          copies_.fresh_bytes.load(), declined_busy_.load(), fills_.calls.load(),
          fills_.bytes.load(),        fills_.ns.load(),     fills_.fresh_bytes.load(),
          copies_.faults.load(),      fills_.faults.load()};
}

}  // namespace cmt
