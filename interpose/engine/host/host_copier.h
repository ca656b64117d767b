// A copier of host memory on a pool of CPU threads: one memcpy or memset cut into units, run by
// every thread at once, a destination never written yet prepared first (engine/shared/fresh_pages.h). A plain
// copier: which calls to hand it, when, and in which process is the host leg's business
// (interposer/host_leg.h). It never allocates or waits for a lock once built, so it may be called
// inside malloc and signal handlers; a call while another holds its threads is declined.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "common/copy_types.h"
#include "config/options.h"

namespace cmt {

class WorkerPool;

class HostCopier {
 public:
  // A copier with `threads` threads on `cpus` (empty: anywhere), preparing fresh destinations as
  // config.fresh_pages says, its idle threads spinning config.spin_us. Throws if a thread cannot
  // start.
  HostCopier(const Config& config, unsigned threads, const std::vector<int>& cpus);
  ~HostCopier();
  HostCopier(const HostCopier&) = delete;
  HostCopier& operator=(const HostCopier&) = delete;

  // memcpy(dst, src, bytes) on all threads. Returns how many leading bytes are copied: `bytes`;
  // 0, having touched nothing, if another job holds the threads; fewer if a fault stopped a unit
  // (bytes past that may be written too, with the source's bytes). The ranges must not overlap.
  std::size_t copy(void* dst, const void* src, std::size_t bytes) noexcept;
  // memset(dst, value, bytes) on all threads; returns how many leading bytes are set, as copy().
  std::size_t fill(void* dst, int value, std::size_t bytes) noexcept;

  unsigned threads() const;

  struct Counts {
    std::uint64_t calls, bytes, ns, fresh_bytes, busy;  // busy: declined, threads held
    std::uint64_t fill_calls, fill_bytes, fill_ns, fill_fresh_bytes;
    std::uint64_t faults, fill_faults;  // calls stopped by a fault, their rest left to libc
  };
  Counts counts() const;

 private:
  class Job;

  // What one kind of job (copies, fills) has done.
  struct Tally {
    std::atomic<std::uint64_t> calls{0}, bytes{0}, ns{0}, fresh_bytes{0}, faults{0};
  };
  // Runs `job` over [dst, dst + bytes) on all threads, a fresh destination prepared first, and
  // counts it in `tally`. Returns the leading bytes done, as copy().
  std::size_t run(Job& job, void* dst, std::size_t bytes, Tally& tally) noexcept;

  const FreshPages fresh_pages_;
  std::unique_ptr<WorkerPool> pool_;
  std::atomic<bool> busy_{false};
  Tally copies_, fills_;
  std::atomic<std::uint64_t> declined_busy_{0};
};

}  // namespace cmt
