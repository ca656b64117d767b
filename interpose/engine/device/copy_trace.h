// Where one copy's time goes, logged at debug level (CMT_LOG=debug): when the first worker
// started (its wake-up latency), when each DMA was enqueued and (D2H) seen landed, how many
// units the issuer copied itself, and how long it spent inside the driver's enqueue calls. At any
// other level every method returns at once; a trace never stops or fails a copy.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/driver_api.h"
#include "engine/device/copy_plan.h"

namespace cmt {

class StagingRing;

class CopyTrace {
 public:
  using Clock = std::chrono::steady_clock;
  CopyTrace();

  std::int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0_).count();
  }
  void unit_started();  // by whichever thread runs a unit: the issuer, or a worker
  void mark(std::int64_t& at) {
    if (on_) at = now_us();
  }
  void mark_once(std::int64_t& at) {
    if (on_ && at < 0) at = now_us();
  }
  void dma_enqueued();
  void piece_landed();  // D2H: the issuer saw a piece's DMA complete
  // While it lives, the issuer is inside the driver: its time is added to the trace's.
  class InDriver {
   public:
    explicit InDriver(CopyTrace& trace)
        : trace_(trace), start_(trace.on_ ? Clock::now() : Clock::time_point{}) {}
    ~InDriver() {
      if (trace_.on_)
        trace_.driver_us_ +=
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count();
    }
    InDriver(const InDriver&) = delete;
    InDriver& operator=(const InDriver&) = delete;

   private:
    CopyTrace& trace_;
    const Clock::time_point start_;
  };
  void report(const char* direction, const CopyLayout& l);
  // H2D only, at debug level: waits for the DMAs of pieces [first, end) still in the ring and
  // logs when each completed, to show how fast the DMAs out of the ring ran. This delays the
  // copy's return, so it is a diagnostic, never on at the default level.
  void report_dma_completions(StagingRing& ring, std::uint64_t base, std::size_t first,
                              std::size_t end) noexcept;

  std::int64_t ready_us = -1, first_dma_us = -1, last_piece_us = -1, populated_us = -1;

 private:
  void log_dma_completions(StagingRing& ring, std::uint64_t base, std::size_t first,
                           std::size_t end);

  const bool on_;
  const Clock::time_point t0_;
  std::atomic<std::int64_t> first_worker_us_{-1};
  std::atomic<unsigned> issuer_units_{0};
  std::int64_t driver_us_ = 0;
  std::vector<std::int64_t> enqueued_us_, landed_us_;
};

}  // namespace cmt
