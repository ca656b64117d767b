// A copier of host memory on a pool of CPU threads: one memcpy, memset or file read cut into
// units, run by every thread at once, a destination never written yet prepared first
// (engine/shared/fresh_pages.h). A plain copier: which calls to hand it, when, and in which process
// is the host leg's business (interposer/host_leg.h). It never allocates or waits for a lock once
// built, so it may be called inside malloc and signal handlers; a call while another holds its
// threads is declined. Its units write under a
// fault guard (engine/shared/fault_guard.h): cmt's SIGSEGV/SIGBUS handler must be in front.
#pragma once

#include <sys/types.h>

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
class UnitTask;

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

  // Who reads a file read's buffer next, which decides how read_file writes it.
  enum class ReadFor {
    Dma,  // a copy engine (CUDA host memory: a loader's pinned staging buffer)
    Cpu,  // the program's own code (a parser, a checkpoint reader's new buffers)
  };
  // pread(fd, dst, bytes, offset) cut into stretches read at once on all threads (issue 32: a
  // file in the page cache is read at many times one thread's rate). For a DMA, and for any read
  // too large to stay in the caches, each stretch is read by pread into a slot of the thread's
  // own and streamed into `dst` from there, so the DMA afterwards finds the lines in memory, not
  // dirty in the threads' caches; a smaller read for the CPU is read straight into `dst`, its
  // lines left in the caches for the code that reads them next. What one pread of the whole would
  // have returned: `bytes` read, fewer where the file ends (up to its end), or an error where the
  // first stretch that came short failed with one (`error`, the errno; bytes read before it still
  // count). Stretches after one that came short may have been read too, as
  // when the file grows meanwhile: only the leading `bytes` are the call's. `taken` false: another
  // job holds the threads and nothing was read.
  static constexpr std::size_t kMostReadUnits = 64;  // stretches of one read, at most
  struct ReadResult {
    bool taken = false;
    std::size_t bytes = 0;
    int error = 0;
  };
  ReadResult read_file(int fd, void* dst, std::size_t bytes, off_t offset, ReadFor next) noexcept;

  unsigned threads() const;
  // The CPU time its threads have used so far (WorkerPool::cpu_seconds).
  double cpu_seconds() const;

  struct Counts {
    std::uint64_t calls, bytes, ns, fresh_bytes, busy;  // busy: declined, threads held
    std::uint64_t fill_calls, fill_bytes, fill_ns, fill_fresh_bytes;
    std::uint64_t faults, fill_faults;  // calls stopped by a fault, their rest left to libc
    std::uint64_t read_calls, read_bytes, read_ns;  // file reads (read_file), bytes asked
    std::uint64_t read_fresh_bytes;                 // of their destinations, prepared as fresh
    std::uint64_t read_streamed_bytes;  // of those bytes, asked of reads through the slots
  };
  Counts counts() const;

 private:
  class Job;
  class FileRead;
  class ReadBounce;
  class Occupied;

  // What one kind of job (copies, fills) has done.
  struct Tally {
    std::atomic<std::uint64_t> calls{0}, bytes{0}, ns{0}, fresh_bytes{0}, faults{0};
  };
  // Runs `job` over [dst, dst + bytes) on all threads, a fresh destination prepared first, and
  // counts it in `tally`. Returns the leading bytes done, as copy().
  std::size_t run(Job& job, void* dst, std::size_t bytes, Tally& tally) noexcept;
  // A destination never written yet (a new buffer): huge pages asked for where config.fresh_pages
  // says so, and its whole blocks faulted in on every thread, counted in `tally`. The threads must
  // be held.
  void prepare_fresh(void* dst, std::size_t bytes, Tally& tally) noexcept;

  const FreshPages fresh_pages_;
  std::unique_ptr<WorkerPool> pool_;
  std::atomic<bool> busy_{false};
  // Runs `task`'s first `units` units on all threads, the issuer helping; the threads are held.
  void run_units(UnitTask& task, std::size_t units) noexcept;

  std::unique_ptr<ReadBounce> bounce_;  // the slots file reads go through (FileRead)
  Tally copies_, fills_, reads_;
  std::atomic<std::uint64_t> read_streamed_bytes_{0};
  std::atomic<std::uint64_t> declined_busy_{0};
};

}  // namespace cmt
