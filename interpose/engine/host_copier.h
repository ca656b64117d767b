// The host leg: memcpy and memmove calls that fill or empty CUDA host memory (a library staging
// through its own pinned buffer, as safetensors and framework loaders do), or with
// CMT_HOST_COPY=all every large one, run on a pool of copy threads on the GPU's NUMA node instead
// of one application thread; so do large memset calls into memory never written yet (a new
// buffer's zero-fill), or with CMT_HOST_FILL=all every large one. The libc hooks
// (hooks/libc_hooks.cpp) only compare the size with the threshold and hand what is left to take()
// or take_fill(); everything else is decided here, so tests drive it directly.
//
// It lives inside malloc (realloc copies with memcpy), signal handlers and forked children, so
// take() never allocates, never waits for a lock, and declines (the caller then uses libc) when in
// doubt: before it is armed, in a forked child, on cmt's own threads, when the ranges of a
// memmove overlap, and while another copy holds its threads.
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

// Copies smaller than this go to libc after one comparison. SIZE_MAX until a copier is armed.
inline std::atomic<std::size_t> g_host_copy_threshold{std::numeric_limits<std::size_t>::max()};
inline std::size_t host_copy_threshold() {
  return g_host_copy_threshold.load(std::memory_order_relaxed);
}
// The same for memset.
inline std::atomic<std::size_t> g_host_fill_threshold{std::numeric_limits<std::size_t>::max()};

class HostCopier {
 public:
  // A copier with `threads` threads on `cpus` (empty: anywhere). Throws if a thread cannot start.
  HostCopier(const Config& config, unsigned threads, const std::vector<int>& cpus);
  ~HostCopier();
  HostCopier(const HostCopier&) = delete;
  HostCopier& operator=(const HostCopier&) = delete;

  // The process's copier, or nullptr while none is armed (never armed, or in a forked child).
  static HostCopier* armed() { return g_armed.load(std::memory_order_acquire); }
  // Builds the process's copier once and arms the hooks (copies, fills, or both, as the modes
  // say). Call from an ordinary context (a CUDA call), never from inside a copy hook. False if
  // both are off or its threads could not start.
  static bool arm(const Config& config, unsigned threads, const std::vector<int>& cpus) noexcept;

  // Copies `bytes` from `src` to `dst` on all threads if this copy is one to take (see above);
  // returns false, having touched nothing, if not. `is_memmove`: the ranges may overlap.
  bool take(void* dst, const void* src, std::size_t bytes, bool is_memmove) noexcept;
  // The copy itself, whatever the mode: false if another copy holds the threads.
  bool copy(void* dst, const void* src, std::size_t bytes) noexcept;

  // memset(dst, value, bytes) on all threads if this fill is one to take (the fill mode, and the
  // same declines as take()); false, having touched nothing, if not.
  bool take_fill(void* dst, int value, std::size_t bytes) noexcept;
  // The fill itself, whatever the mode: false if another job holds the threads.
  bool fill(void* dst, int value, std::size_t bytes) noexcept;

  HostCopy mode() const { return mode_; }
  HostFill fill_mode() const { return fill_mode_; }
  unsigned threads() const;

  struct Counts {
    std::uint64_t calls, bytes, ns, fresh_bytes, busy;  // busy: declined, threads held
    std::uint64_t fill_calls, fill_bytes, fill_ns, fill_fresh_bytes;
  };
  Counts counts() const;

 private:
  class Job;
  static inline std::atomic<HostCopier*> g_armed{nullptr};

  // What one kind of job (copies, fills) has done.
  struct Tally {
    std::atomic<std::uint64_t> calls{0}, bytes{0}, ns{0}, fresh_bytes{0};
  };
  // Runs `job` over [dst, dst + bytes) on all threads, a fresh destination prepared first, and
  // counts it in `tally`. False if another job holds the threads.
  bool run(Job& job, void* dst, std::size_t bytes, Tally& tally) noexcept;

  const HostCopy mode_;
  const HostFill fill_mode_;
  const FreshPages fresh_pages_;
  std::unique_ptr<WorkerPool> pool_;
  std::atomic<bool> busy_{false};
  Tally copies_, fills_;
  std::atomic<std::uint64_t> declined_busy_{0};
};

}  // namespace cmt
