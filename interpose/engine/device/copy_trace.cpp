#include "engine/device/copy_trace.h"

#include <string>

#include "common/log.h"
#include "common/thread_context.h"
#include "engine/shared/staging_ring.h"
#include "engine/shared/worker_pool.h"

namespace cmt {

namespace {
std::string join(const std::vector<std::int64_t>& times) {
  std::string out;
  for (std::int64_t t : times) out += (out.empty() ? "" : " ") + std::to_string(t);
  return out;
}
}  // namespace

CopyTrace::CopyTrace() : on_(log_enabled(LogLevel::debug)), t0_(Clock::now()) {}

void CopyTrace::unit_started() {
  if (!on_) return;
  if (!t_thread.copy_thread) {
    issuer_units_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::int64_t none = -1;
  if (first_worker_us_.load(std::memory_order_relaxed) == -1)
    first_worker_us_.compare_exchange_strong(none, now_us());
}

void CopyTrace::dma_enqueued() {
  if (!on_) return;
  try {
    enqueued_us_.push_back(now_us());
  } catch (...) {  // a trace never stops a copy
  }
}

void CopyTrace::piece_landed() {
  if (!on_) return;
  try {
    landed_us_.push_back(now_us());
  } catch (...) {
  }
}

void CopyTrace::report(const char* direction, const CopyLayout& l) {
  if (!on_) return;
  CMT_LOG(debug,
          "{} {} KiB: {} pieces ({} ramp) x {} units; ready {} us, first worker {} us, "
          "first DMA {} us, last piece {} us, return {} us; issuer copied {} units; "
          "{} us in driver enqueue calls; DMAs enqueued at {} us{}{}",
          direction, l.bytes >> 10, l.pieces, l.ramp, l.units_per_piece, ready_us,
          first_worker_us_.load(), first_dma_us, last_piece_us, now_us(), issuer_units_.load(),
          driver_us_, join(enqueued_us_), landed_us_.empty() ? "" : ", landed at ",
          join(landed_us_));
}

void CopyTrace::report_dma_completions(StagingRing& ring, std::uint64_t base, std::size_t first,
                                       std::size_t end) noexcept {
  if (!on_ || first >= end) return;
  try {
    log_dma_completions(ring, base, first, end);
  } catch (...) {  // a trace never fails a copy
  }
}

void CopyTrace::log_dma_completions(StagingRing& ring, std::uint64_t base, std::size_t first,
                                    std::size_t end) {
  std::string times;
  const auto give_up = Clock::now() + std::chrono::seconds(1);
  for (std::size_t p = first; p < end; ++p) {
    CUresult r;
    while ((r = ring.poll_idle(ring.slot(base + p))) == CUDA_ERROR_NOT_READY &&
           Clock::now() < give_up) {
    }
    if (r != CUDA_SUCCESS) break;
    times += (times.empty() ? "" : " ") + std::to_string(now_us());
  }
  CMT_LOG(debug, "H2D DMAs enqueued at (us): {}; those of pieces {}..{} completed by: {}",
          join(enqueued_us_),
          first, end - 1, times);
}

}  // namespace cmt
