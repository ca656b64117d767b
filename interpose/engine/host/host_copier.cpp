#include "engine/host/host_copier.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

// One pread cut into stretches, each read by one thread. Not under a fault guard: pread into memory
// that is not there returns EFAULT, it raises no signal.
class HostCopier::FileRead final : public UnitTask {
 public:
  static constexpr std::size_t kMostUnits = kMostReadUnits;
  FileRead(int fd, char* dst, std::size_t bytes, off_t offset, std::size_t unit)
      : fd_(fd), dst_(dst), bytes_(bytes), offset_(offset), unit_(unit) {}
  std::size_t units() const { return (bytes_ + unit_ - 1) / unit_; }
  void run_unit(std::size_t i) override {
    const std::size_t off = i * unit_, n = std::min(unit_, bytes_ - off);
    std::size_t got = 0;
    int error = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd_, dst_ + off + got, n - got,
                                offset_ + static_cast<off_t>(off + got));
      if (r > 0) {
        got += static_cast<std::size_t>(r);
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else {
        if (r < 0) error = errno;
        break;  // 0: the file ends here
      }
    }
    got_[i] = got;  // published to the issuer by the pool's count of finished units
    error_[i] = error;
  }
  // What one pread of the whole returns: the stretches up to the first that came short.
  ReadResult result() const {
    ReadResult out{true, 0, 0};
    for (std::size_t i = 0; i < units(); ++i) {
      out.bytes += got_[i];
      if (got_[i] < std::min(unit_, bytes_ - i * unit_)) {
        out.error = error_[i];
        break;
      }
    }
    return out;
  }

 private:
  const int fd_;
  char* const dst_;
  const std::size_t bytes_;
  const off_t offset_;
  const std::size_t unit_;
  std::size_t got_[kMostUnits] = {};
  int error_[kMostUnits] = {};
};

namespace {
// A stretch of a file read is at least this long: a pread costs a system call and a page-cache
// lookup per page.
constexpr std::size_t kMinReadUnit = 64u << 10;

// About two stretches per thread, within FileRead::kMostUnits.
std::size_t read_unit_for(std::size_t bytes, std::size_t threads) {
  const std::size_t most = HostCopier::kMostReadUnits;
  std::size_t unit = std::max({kMinReadUnit, bytes / (threads * 2), (bytes + most - 1) / most});
  return (unit + 4095) / 4096 * 4096;  // whole pages: each stretch copies into its own pages
}

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
                                         FaultSignals::Delivered, config.wake_ahead)) {}

HostCopier::~HostCopier() = default;

unsigned HostCopier::threads() const {
  return pool_->size();
}

double HostCopier::cpu_seconds() const {
  return pool_->cpu_seconds();
}

// The copier's threads held for one job (none: another job holds them, and this one is declined),
// the issuer's own copies while it helps left to libc, and the job counted in `tally` at its end.
class HostCopier::Occupied {
 public:
  Occupied(HostCopier& copier, Tally& tally, std::size_t bytes)
      : copier_(copier), tally_(tally), bytes_(bytes), t0_(std::chrono::steady_clock::now()) {
    bool expected = false;
    held_ = copier.busy_.compare_exchange_strong(expected, true, std::memory_order_acquire);
    if (!held_) {
      copier.declined_busy_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    copier.pool_->queue().wake();
  }
  ~Occupied() {
    if (!held_) return;
    copier_.busy_.store(false, std::memory_order_release);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - t0_)
                        .count();
    tally_.calls.fetch_add(1, std::memory_order_relaxed);
    tally_.bytes.fetch_add(bytes_, std::memory_order_relaxed);
    tally_.ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
  }
  Occupied(const Occupied&) = delete;
  Occupied& operator=(const Occupied&) = delete;
  explicit operator bool() const { return held_; }

 private:
  HostCopier& copier_;
  Tally& tally_;
  const std::size_t bytes_;
  const std::chrono::steady_clock::time_point t0_;
  bool held_ = false;
  InsideCmt inside_;
};

std::size_t HostCopier::run(Job& job, void* dst, std::size_t bytes, Tally& tally) noexcept {
  const Occupied occupied(*this, tally, bytes);
  if (!occupied) return 0;
  prepare_fresh(dst, bytes, tally);
  run_units(job, job.units());
  const std::size_t done = job.done();
  if (done < bytes) tally.faults.fetch_add(1, std::memory_order_relaxed);
  return done;
}

void HostCopier::prepare_fresh(void* dst, std::size_t bytes, Tally& tally) noexcept {
  const FreshBlocks fresh = find_fresh(fresh_pages_, dst, bytes);
  if (!fresh.count) return;
  if (fresh_pages_ == FreshPages::Huge) advise_huge_pages(fresh);
  PopulateFresh populate(fresh);
  run_units(populate, fresh.count);
  tally.fresh_bytes.fetch_add(fresh.count * kFreshBlock, std::memory_order_relaxed);
}

void HostCopier::run_units(UnitTask& task, std::size_t units) noexcept {
  WorkQueue& pool = pool_->queue();
  Backoff backoff;
  pool.begin(&task);
  pool.publish(units);
  while (pool.finished() < units)
    if (!pool.help()) backoff.pause();
  pool.end();
}

HostCopier::ReadResult HostCopier::read_file(int fd, void* dst, std::size_t bytes,
                                             off_t offset) noexcept {
  if (bytes == 0) return {true, 0, 0};
  const Occupied occupied(*this, reads_, bytes);
  if (!occupied) return {};
  // A new buffer read into (torch.load reads each storage into one) spends most of a read in
  // faults of its pages, one per 4 KiB, as a device-to-host copy's fresh destination does.
  prepare_fresh(dst, bytes, reads_);
  FileRead job(fd, static_cast<char*>(dst), bytes, offset,
               read_unit_for(bytes, pool_->size() + 1));
  run_units(job, job.units());
  return job.result();
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
          copies_.faults.load(),      fills_.faults.load(),  reads_.calls.load(),
          reads_.bytes.load(),        reads_.ns.load(),      reads_.fresh_bytes.load()};
}

}  // namespace cmt
