#include "engine/host/host_copier.h"

#include <sys/mman.h>
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

// The slots file reads for a DMA, and the large ones for the CPU, go through (FileRead; read_file
// says which). pread's copy into the program's buffer leaves each thread's stretch dirty in its own
// core's caches, and the program's DMA from the buffer then fetches every line from there: on an
// H100 machine the copies from a 16 MiB pinned buffer took 62-71 ms per 2.2 GB after cmt's 8
// threads had read into it, 51-56 after one thread's read (lab/NOTES.md 84, 92). Read into a slot
// that stays in the core's cache and streamed out with non-temporal stores, the lines go to memory
// instead, and the copies took 46-53 ms with the reads as fast as before. 256 KiB a slot: it stays
// in an L2 on current x86 server cores with room for the page cache's lines passing through (slots
// of 1 MiB lost much of the gain). One slot per thread that can run a stretch at once (the pool's
// threads and the issuer), claimed lock-free.
class HostCopier::ReadBounce {
 public:
  static constexpr std::size_t kSlotBytes = 256u << 10;
  // The slots are mapped here, not at the first read: a mapping made then could land in a hole of
  // the very buffer being read (a program's buffer partly unmapped, whose read must fail with
  // EFAULT), and the read would then write into the slots. Their pages come at the first read.
  explicit ReadBounce(std::size_t slots) : slots_(std::min<std::size_t>(slots, 64)) {
    void* p = mmap(nullptr, slots_ * kSlotBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;  // reads go straight into the buffer
    base_ = static_cast<char*>(p);
    free_.store(slots_ == 64 ? ~0ull : (1ull << slots_) - 1, std::memory_order_relaxed);
  }
  ~ReadBounce() {
    if (base_) munmap(base_, slots_ * kSlotBytes);
  }
  ReadBounce(const ReadBounce&) = delete;
  ReadBounce& operator=(const ReadBounce&) = delete;
  bool mapped() const { return base_ != nullptr; }
  // A slot's memory, or null where none is free (a pool grown past the slots).
  char* claim() {
    std::uint64_t mask = free_.load(std::memory_order_acquire);
    while (mask) {
      const int i = __builtin_ctzll(mask);
      if (free_.compare_exchange_weak(mask, mask & ~(1ull << i), std::memory_order_acq_rel))
        return base_ + static_cast<std::size_t>(i) * kSlotBytes;
    }
    return nullptr;
  }
  void release(char* slot) {
    const std::size_t i = static_cast<std::size_t>(slot - base_) / kSlotBytes;
    free_.fetch_or(1ull << i, std::memory_order_release);
  }

 private:
  const std::size_t slots_;
  char* base_ = nullptr;
  std::atomic<std::uint64_t> free_{0};
};

// One pread cut into stretches, each read by one thread. Not under a fault guard: pread into memory
// that is not there returns EFAULT, it raises no signal. Read through a slot (ReadBounce), only the
// streaming copy out of it runs under a guard, and where it faults the rest of the stretch is read
// directly, so that the kernel says what one pread would (the bytes before the fault, or EFAULT).
class HostCopier::FileRead final : public UnitTask {
 public:
  static constexpr std::size_t kMostUnits = kMostReadUnits;
  FileRead(int fd, char* dst, std::size_t bytes, off_t offset, std::size_t unit, ReadBounce* bounce)
      : fd_(fd), dst_(dst), bytes_(bytes), offset_(offset), unit_(unit), bounce_(bounce) {}
  std::size_t units() const { return (bytes_ + unit_ - 1) / unit_; }
  void run_unit(std::size_t i) override {
    const std::size_t off = i * unit_, n = std::min(unit_, bytes_ - off);
    char* slot = bounce_ ? bounce_->claim() : nullptr;
    std::size_t got = 0;
    int error = 0;
    bool direct = !slot;
    if (slot) {
      error = read_through(slot, off, n, &got, &direct);
      bounce_->release(slot);
    }
    if (direct) error = read_direct(off, n, &got);
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
  // pread of [off + *got, off + n) into the destination, EINTR retried; the errno, or 0 where the
  // file ended (got < n) or all was read.
  int read_direct(std::size_t off, std::size_t n, std::size_t* got) const {
    while (*got < n) {
      const ssize_t r =
          ::pread(fd_, dst_ + off + *got, n - *got, offset_ + static_cast<off_t>(off + *got));
      if (r > 0)
        *got += static_cast<std::size_t>(r);
      else if (r < 0 && errno == EINTR)
        continue;
      else
        return r < 0 ? errno : 0;  // 0: the file ends here
    }
    return 0;
  }
  struct Stream {
    char* dst;
    const char* src;
    std::size_t n;
  };
  static void stream(void* arg) {
    const Stream& s = *static_cast<const Stream*>(arg);
    copy_streaming(s.dst, s.src, s.n);
  }
  // The stretch through `slot`, piece by piece: a pread into it, streamed out. Returns the errno,
  // or 0 where all was read or the file ended (*got < n). A piece whose streaming copy faulted
  // sets *direct, *got left at the piece's start: read_direct reads the rest as the kernel would.
  int read_through(char* slot, std::size_t off, std::size_t n, std::size_t* got, bool* direct) {
    while (*got < n) {
      const std::size_t want = std::min(ReadBounce::kSlotBytes, n - *got);
      const ssize_t r = ::pread(fd_, slot, want, offset_ + static_cast<off_t>(off + *got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return r < 0 ? errno : 0;
      Stream s{dst_ + off + *got, slot, static_cast<std::size_t>(r)};
      if (!run_fault_guarded(&FileRead::stream, &s)) {
        *direct = true;
        return 0;
      }
      *got += static_cast<std::size_t>(r);
    }
    return 0;
  }

  const int fd_;
  char* const dst_;
  const std::size_t bytes_;
  const off_t offset_;
  const std::size_t unit_;
  ReadBounce* const bounce_;
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
                                         FaultSignals::Delivered, config.wake_ahead)),
      bounce_(std::make_unique<ReadBounce>(pool_->size() + 1)) {}

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

HostCopier::ReadResult HostCopier::read_file(int fd, void* dst, std::size_t bytes, off_t offset,
                                             ReadFor next) noexcept {
  if (bytes == 0) return {true, 0, 0};
  const Occupied occupied(*this, reads_, bytes);
  if (!occupied) return {};
  // A new buffer read into (torch.load reads each storage into one) spends most of a read in
  // faults of its pages, one per 4 KiB, as a device-to-host copy's fresh destination does.
  prepare_fresh(dst, bytes, reads_);
  // Through the slots where streaming stores pay: for a DMA, and from the size on where a copy
  // streams (Job). A smaller read for the CPU is read straight into the buffer, as before the
  // slots, its lines left in the threads' caches for the code that reads them next (on an H100
  // machine a read of 1-4 MiB and numpy's sum of it took 95-107 ms per GB so, 120-146 streamed;
  // from 16 MiB up the two were level: lab/NOTES.md 94).
  const bool streamed = (next == ReadFor::Dma || bytes >= kStreamFrom) && bounce_->mapped();
  if (streamed) read_streamed_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  FileRead job(fd, static_cast<char*>(dst), bytes, offset, read_unit_for(bytes, pool_->size() + 1),
               streamed ? bounce_.get() : nullptr);
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
  return {copies_.calls.load(),       copies_.bytes.load(),  copies_.ns.load(),
          copies_.fresh_bytes.load(), declined_busy_.load(), fills_.calls.load(),
          fills_.bytes.load(),        fills_.ns.load(),      fills_.fresh_bytes.load(),
          copies_.faults.load(),      fills_.faults.load(),  reads_.calls.load(),
          reads_.bytes.load(),        reads_.ns.load(),      reads_.fresh_bytes.load(),
          read_streamed_bytes_.load()};
}

}  // namespace cmt
