// Whether a copy just under its direction's threshold is worth taking now. Between
// warm_threshold and threshold, cmt beats CUDA's path only while its copy threads are awake: a
// sleeping thread takes tens of microseconds to wake (on the H200 VM), a whole small copy's time,
// and a copy that wakes them runs at 0.7-0.9x CUDA's path. The threads spin for spin_us after
// the engine's last copy, so a copy is taken
//   - within spin_us less a margin (kSpinMargin) of the end of the engine's last copy (they are
//     still spinning; where they nap between copies that have come far apart, within the short
//     bridge they spin first), or
//   - as the next of a dense run: kDenseRun offers in a row, each within that time of the one
//     before, were forwarded. Taking it wakes the threads for those that follow; a program that
//     makes small copies now and then never pays for the wake-up.
// It is consulted before the driver is asked anything, so that a forwarded copy costs CUDA's
// path no more than a clock read; an offer that then proves not to be a pageable copy cmt takes
// (pinned, below the threshold its direction has) ends the run. Lock-free and approximate: a
// race between threads only decides one copy the other way.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "common/steady_clock.h"

namespace cmt {

class WarmGate {
 public:
  // Offers forwarded in a row, each soon after the one before, before one is taken cold.
  static constexpr unsigned kDenseRun = 3;

  // `spin`: how long the engine's idle threads spin before they sleep (0: they never spin, and
  // nothing is taken warm).
  void set_spin(std::chrono::microseconds spin) {
    awake_ns_.store(awake_for(std::chrono::duration_cast<std::chrono::nanoseconds>(spin).count()),
                    std::memory_order_relaxed);
  }

  // A copy in the warm range is offered at `now_ns`: take it? Counts the offer.
  bool admit(std::int64_t now_ns);
  // The offer admitted last is not a copy cmt takes after all: it does not make a run.
  void not_taken() { run_.store(0, std::memory_order_relaxed); }
  // A copy through the engine ended at `now_ns`: its threads spin from here, for the spin set,
  // or for `spin_ns` if given: where the gaps between copies have outlasted the spin, the threads
  // spin only a bridge (engine/shared/worker_pool.h, JobGaps::kBridge) and then nap until the next
  // copy is due.
  void copied(std::int64_t now_ns, std::int64_t spin_ns = -1) {
    const std::int64_t awake = awake_ns_.load(std::memory_order_relaxed);
    awake_until_.store(now_ns + (spin_ns < 0 ? awake : std::min(awake, awake_for(spin_ns))),
                       std::memory_order_relaxed);
  }

  static std::int64_t now_ns() { return steady_now_ns(); }

 private:
  static constexpr std::int64_t kLongAgo = INT64_MIN / 4;
  // A worker's spin starts when its last piece is done, before the copy returns: by the length
  // of one piece's DMA (~40 us for 2 MiB) on a host-to-device copy, and a few microseconds on a
  // device-to-host one. This much of spin_us (or a quarter of it, if less) is left as margin.
  static constexpr std::int64_t kSpinMargin = 100'000;  // ns
  static std::int64_t awake_for(std::int64_t spin_ns) {
    return spin_ns - std::min<std::int64_t>(spin_ns / 4, kSpinMargin);
  }
  std::atomic<std::int64_t> awake_ns_{0};
  std::atomic<std::int64_t> awake_until_{kLongAgo};  // the last copy's end and its threads' spin
  std::atomic<std::int64_t> last_offer_{kLongAgo};
  std::atomic<unsigned> run_{0};
};

}  // namespace cmt
