#include "interposer/stream_timer.h"

namespace cmt {

StreamTimer::~StreamTimer() {
  for (Slot& slot : slots_) drop_events(slot);
}

int StreamTimer::begin(CUstream stream) {
  if (!driver_.event_elapsed_time) return -1;  // a table without it (a test's): not timed
  RelaxedCaptureMode relaxed(driver_);         // another thread's global capture stays valid
  // A record on a stream being captured would become a node of the program's graph.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (driver_.stream_is_capturing(stream, &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return -1;
  CUcontext ctx = nullptr;
  if (driver_.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) return -1;
  std::lock_guard<std::mutex> lk(mu_);
  for (int i = 0; i < kSlots; ++i) {
    Slot& slot = slots_[i];
    if (slot.state != State::Free) continue;
    if (!events_for(slot, ctx)) return -1;
    if (driver_.event_record(slot.start, stream) != CUDA_SUCCESS) {
      free_slot(slot, false);
      return -1;
    }
    slot.state = State::Started;
    return i;
  }
  return -1;
}

void StreamTimer::end(int i, CUstream stream, bool to_device, std::size_t bytes) {
  if (i < 0 || i >= kSlots) return;
  RelaxedCaptureMode relaxed(driver_);
  std::lock_guard<std::mutex> lk(mu_);
  Slot& slot = slots_[i];
  if (slot.state != State::Started) return;
  if (driver_.event_record(slot.end, stream) != CUDA_SUCCESS) {
    free_slot(slot, false);
    return;
  }
  slot.state = State::Ended;
  slot.to_device = to_device;
  slot.bytes = bytes;
  waiting_.fetch_add(1, std::memory_order_relaxed);
}

void StreamTimer::collect(const std::function<void(bool, std::size_t, std::uint64_t)>& done) {
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return;
  RelaxedCaptureMode relaxed(driver_);
  for (Slot& slot : slots_) {
    if (slot.state != State::Ended) continue;
    const CUresult ended = driver_.event_query(slot.end);
    if (ended == CUDA_ERROR_NOT_READY) continue;
    float ms = 0;
    const bool timed = ended == CUDA_SUCCESS &&
                       driver_.event_elapsed_time(&ms, slot.start, slot.end) == CUDA_SUCCESS &&
                       ms >= 0;
    const bool to_device = slot.to_device;
    const std::size_t bytes = slot.bytes;
    waiting_.fetch_sub(1, std::memory_order_relaxed);
    free_slot(slot, timed);  // events that failed are not used again
    if (timed) done(to_device, bytes, static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6));
  }
}

bool StreamTimer::events_for(Slot& slot, CUcontext ctx) {
  if (slot.start && slot.ctx == ctx) return true;
  drop_events(slot);
  // Timing events (no CU_EVENT_DISABLE_TIMING); they are only queried, never waited on.
  if (driver_.event_create(&slot.start, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    slot.start = nullptr;
    return false;
  }
  if (driver_.event_create(&slot.end, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    slot.end = nullptr;
    drop_events(slot);
    return false;
  }
  slot.ctx = ctx;
  return true;
}

void StreamTimer::drop_events(Slot& slot) {
  // An event may be destroyed with a record of it still queued: CUDA frees it once it ran.
  if (slot.start) driver_.event_destroy(slot.start);
  if (slot.end) driver_.event_destroy(slot.end);
  slot.start = slot.end = nullptr;
  slot.ctx = nullptr;
}

void StreamTimer::free_slot(Slot& slot, bool keep_events) {
  if (!keep_events) drop_events(slot);
  slot.state = State::Free;
}

}  // namespace cmt
