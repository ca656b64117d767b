// The host leg: the program's own large memcpy, memmove and memset calls, and its large reads of
// files into CUDA host memory, run on a pool of copy threads near the GPU instead of on one
// application thread. The libc hooks (hooks/libc_hooks.cpp, in libcmt-host.so) compare a call's
// size with the thresholds here and hand what is left to take_copy(), take_fill(), take_read() or
// take_readv(); this room decides which calls to take and owns the host leg's
// process state: armed or not, the thresholds, the modes, the forked-child rule. The copying
// itself is the engine's (engine/host/host_copier.h), a plain copier with no state of the
// process's.
//
// It runs inside malloc (realloc copies with memcpy), signal handlers and forked children, so a
// decision never allocates, never waits for a lock, and declines (the caller then uses libc)
// whenever in doubt: not armed, in a forked child, on cmt's own threads or code, an opted-out
// thread, overlapping ranges, another copy holding the threads, cmt's fault handler displaced.
//
// A taken call behaves as libc's would for the program: a fault comes back as the part left for
// libc to make on the calling thread (interposer/signal_chain.h), and while cmt's threads work
// on the caller's buffers the caller is held (common/caller_hold.h): no cancellation, and a
// signal it handles is put aside and sent again once the call is done, so no handler can leave
// the call (siglongjmp) with copy threads still writing.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

#include "common/caller_hold.h"
#include "common/copy_types.h"
#include "config/options.h"
#include "engine/host/host_copier.h"
#include "interposer/host_memory.h"

namespace cmt {

class HostLeg {
 public:
  static constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();

  constexpr HostLeg() = default;
  // A host leg for tests: reads `pinned` for CUDA host memory instead of the process's map, and
  // does not ask whether cmt's fault handler is in front (a test process installs none).
  explicit constexpr HostLeg(const HostMemoryMap* pinned) : pinned_(pinned) {}

  // Starts taking calls with `copier` (which must outlive every call): copies in `config`'s
  // host_copy mode from its host_copy_threshold up, fills in its host_fill mode from its
  // host_fill_threshold up. Call from an ordinary context (a CUDA call), once.
  void arm(HostCopier& copier, const Config& config) noexcept;
  // Every call goes to libc again, at once (a forked child has none of the parent's threads).
  void disarm() noexcept;
  // In a forked child (one thread): disarmed, and the parent's copier forgotten, so that the
  // child's statistics say it has no host leg rather than report the parent's copies.
  void forget_in_child() noexcept;
  HostCopier* copier() const { return copier_.load(std::memory_order_acquire); }

  // The hooks' questions: how many leading bytes cmt copied (filled). `bytes`: all; 0: none, it
  // touched nothing or a fault stopped it at once; between: the rest is for libc, on this thread.
  // A call taken holds the calling thread in `hold` (common/caller_hold.h) for the caller to
  // release once out of libcmt.so; without one (tests), it is not held.
  // A copy under host_copy_threshold, from rules::kUnmappedCopyFrom up, is taken only where it
  // fills CUDA host memory from pageable memory whose middle page is not mapped in yet (a loader
  // copying a tensor from a fresh file mapping into its pinned buffer): the page faults are what
  // the threads share.
  std::size_t take_copy(void* dst, const void* src, std::size_t bytes,
                        CallerHold* hold = nullptr) noexcept;
  std::size_t take_fill(void* dst, int value, std::size_t bytes,
                        CallerHold* hold = nullptr) noexcept;

  // A read of a regular file into CUDA host memory (a loader's staging buffer; with host_copy =
  // all, into any memory), on cmt's threads:
  // pread's at `offset`, or read's (`offset` negative) at the descriptor's offset, which then
  // moves past the bytes read as one read moves it. `taken` false: the call is libc's (not armed,
  // under rules::kFileReadFrom, not into CUDA host memory, not a regular file open for reading
  // without O_DIRECT, an offset that cannot be had, the threads held by another call). Taken:
  // `result` is what the call returns, with `error` its errno where that is -1. Between the
  // offset's read and its move the descriptor is not locked: another thread reading the same
  // open file at the same time may see the offset before the move.
  struct ReadTaken {
    bool taken = false;
    long result = 0;
    int error = 0;
  };
  ReadTaken take_read(int fd, void* dst, std::size_t bytes, long long offset,
                      CallerHold* hold = nullptr) noexcept;
  // readv and preadv (`offset` negative: readv's, at the descriptor's offset, moved past the bytes
  // read): taken when the file is one take_read reads, the `count` segments (at most
  // rules::kMostReadSegments) can be read by the kernel, and one of them, of the read threshold or more,
  // lies in CUDA host memory. Every segment is then read in order at its place in the file, those
  // on cmt's threads, the rest with one pread each, and the call returns what one readv would:
  // the bytes up to the first segment that came short, or -1 and the errno where the first failed.
  // The segments' list is read with process_vm_readv, so a bad pointer is EFAULT, as the kernel's.
  // A descriptor a thread's readv found to be no such file is not asked again for this many of
  // that thread's next readv calls on it: a program reading a socket with readv pays the fstat
  // that says so once in that many calls (it cost a 64-byte socket readv 0.7 us on the
  // development VM, +28%; bench/lab/readv_hook_cost.sh). One closed and opened again as a file
  // meanwhile is read by libc until then, never wrongly.
  static constexpr unsigned kNotFileCalls = 256;
  ReadTaken take_readv(int fd, const struct iovec* segments, int count, long long offset,
                       CallerHold* hold = nullptr) noexcept;

  // The smallest memcpy or memmove take_copy may take, which the hooks compare each call with:
  // host_copy_threshold, or rules::kUnmappedCopyFrom where that is lower; SIZE_MAX disarmed.
  const std::atomic<std::size_t>& copy_gate() const { return copy_gate_; }
  // Copies under host_copy_threshold taken because their source was still to be faulted in.
  std::uint64_t unmapped_copies() const { return unmapped_copies_.load(std::memory_order_relaxed); }
  const std::atomic<std::size_t>& fill_threshold() const { return fill_threshold_; }
  const std::atomic<std::size_t>& read_threshold() const { return read_threshold_; }

  // Whether the program displaced cmt's fault handler past sigaction, which disarmed the leg.
  bool handler_displaced() const { return handler_displaced_.load(std::memory_order_relaxed); }

  // Whether libcmt-host.so is loaded (hooks/host_leg_abi.h): without it no call can arrive.
  void note_hooks_loaded() noexcept { hooks_loaded_.store(true, std::memory_order_relaxed); }
  bool hooks_loaded() const { return hooks_loaded_.load(std::memory_order_relaxed); }

 private:
  const HostMemoryMap& pinned() const { return pinned_ ? *pinned_ : cuda_host_memory(); }
  // Whether a read of file `fd` at `offset` (< 0: the descriptor's) into `dst` is read on the
  // threads, and for whom (nothing: libc reads it): into CUDA host memory, for a DMA; or, with
  // host_reads = all, into any memory where the file's byte there is in the page cache, for the
  // program's code (torch.load reads each tensor's bytes into a new pageable buffer, one read()
  // each: bench/lab/NOTES.md 48). `anywhere` holds the answer for memory of the second kind once
  // asked, for the other segments of one readv.
  enum class ReadsAnywhere { Unasked, Yes, No };
  std::optional<HostCopier::ReadFor> reads_into(const void* dst, std::size_t bytes,
                                                ReadsAnywhere& anywhere, int fd,
                                                long long offset) const;
  // Whether a copy under the threshold is one take_copy takes: it fills CUDA host memory from
  // pageable memory whose middle page is not mapped in yet.
  bool unmapped_into_pinned(const void* dst, const void* src, std::size_t bytes) const;
  // Whether a fault on a copy thread would reach cmt's handler (asked of the kernel now and then).
  bool faults_caught() noexcept;

  std::atomic<std::size_t> copy_threshold_{kNever};
  std::atomic<std::size_t> copy_gate_{kNever};
  std::atomic<std::uint64_t> unmapped_copies_{0};
  std::atomic<std::size_t> fill_threshold_{kNever};
  std::atomic<std::size_t> read_threshold_{kNever};
  std::atomic<HostCopier*> copier_{nullptr};
  std::atomic<HostCopy> copy_mode_{HostCopy::Off};
  std::atomic<bool> reads_anywhere_{false};  // host_reads = all, or host_copy = all
  std::atomic<HostFill> fill_mode_{HostFill::Off};
  std::atomic<bool> hooks_loaded_{false};
  std::atomic<long long> handlers_checked_ns_{0};
  std::atomic<bool> handler_displaced_{false};
  const HostMemoryMap* pinned_ = nullptr;
};

// Never destroyed, and valid before any constructor runs: the hooks may be called from static
// destructors and from libraries initialised before libcmt.so.
static_assert(std::is_trivially_destructible_v<HostLeg>);

// The process's host leg.
HostLeg& host_leg();

// Builds the process's copier (`threads` threads on `cpus`, none: anywhere), puts cmt's fault
// handler in front and arms the process's host leg, once; true if it is armed. False if both
// modes are off, the hooks are not loaded, the handler cannot be installed or the threads could
// not start (said once in the log).
bool arm_host_leg(const Config& config, unsigned threads, const std::vector<int>& cpus) noexcept;

}  // namespace cmt
