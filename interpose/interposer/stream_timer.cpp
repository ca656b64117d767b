#include "interposer/stream_timer.h"

#include <algorithm>

namespace cmt {
namespace {

// The calling thread, as the per-thread default stream's owner.
std::uintptr_t this_thread_key() {
  static thread_local char marker;
  return reinterpret_cast<std::uintptr_t>(&marker);
}

std::uint64_t ns_of(float ms) {
  return static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6);
}

}  // namespace

StreamTimer::StreamTimer(const DriverApi& driver, int slots, bool gaps)
    : driver_(driver), gaps_(gaps), slots_(static_cast<std::size_t>(std::max(slots, 1))) {}

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
  const StreamKey key{ctx, stream, stream == CU_STREAM_PER_THREAD ? this_thread_key() : 0};
  std::lock_guard<std::mutex> lk(mu_);
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (slot.state != State::Free) continue;
    if (!events_for(slot, ctx)) return -1;
    if (driver_.event_record(slot.start, stream) != CUDA_SUCCESS) {
      drop_events(slot);
      return -1;
    }
    slot.state = State::Started;
    slot.key = key;
    ++begun_;
    if (gaps_) {
      const int before = last_on(key);
      if (before >= 0) {
        slot.before = before;
        ++slots_[static_cast<std::size_t>(before)].after;
      }
    }
    return static_cast<int>(i);
  }
  return -1;
}

void StreamTimer::end(int i, CUstream stream, std::uint64_t tag) {
  if (i < 0 || i >= static_cast<int>(slots_.size())) return;
  RelaxedCaptureMode relaxed(driver_);
  std::lock_guard<std::mutex> lk(mu_);
  Slot& slot = slots_[static_cast<std::size_t>(i)];
  if (slot.state != State::Started) return;
  if (driver_.event_record(slot.end, stream) != CUDA_SUCCESS) {
    unlink_before(slot);
    drop_events(slot);
    slot.state = State::Free;
    return;
  }
  slot.state = State::Ended;
  slot.tag = tag;
  waiting_.fetch_add(1, std::memory_order_relaxed);
  if (gaps_) set_last(slot.key, i);
}

void StreamTimer::collect(const std::function<void(const Timing&)>& done) {
  std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return;
  RelaxedCaptureMode relaxed(driver_);
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (slot.state != State::Ended) continue;
    const CUresult ended = driver_.event_query(slot.end);
    if (ended == CUDA_ERROR_NOT_READY) continue;
    float ms = 0;
    const bool timed = ended == CUDA_SUCCESS &&
                       driver_.event_elapsed_time(&ms, slot.start, slot.end) == CUDA_SUCCESS &&
                       ms >= 0;
    Timing timing;
    timing.tag = slot.tag;
    timing.ns = ns_of(ms);
    float gap_ms = 0;
    // The copy before on the stream ended before this one's start was reached, so its end has
    // completed too.
    if (timed && slot.before >= 0 &&
        driver_.event_elapsed_time(&gap_ms, slots_[static_cast<std::size_t>(slot.before)].end,
                                   slot.start) == CUDA_SUCCESS &&
        gap_ms >= 0)
      timing.gap_ns = static_cast<std::int64_t>(ns_of(gap_ms));
    waiting_.fetch_sub(1, std::memory_order_relaxed);
    unlink_before(slot);
    slot.state = State::Done;
    slot.broken = !timed;  // events that failed are not used again
    release_if_unused(static_cast<int>(i));
    if (timed) done(timing);
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

void StreamTimer::forget_context(CUcontext ctx, bool alive) {
  std::lock_guard<std::mutex> lk(mu_);
  for (Slot& slot : slots_) {
    if (slot.ctx != ctx) continue;
    // A timing under way meets no events: its record or query fails, and it is not timed.
    if (alive) {
      drop_events(slot);
    } else {
      slot.start = slot.end = nullptr;
      slot.ctx = nullptr;
    }
  }
}

void StreamTimer::drop_events(Slot& slot) {
  // An event may be destroyed with a record of it still queued: CUDA frees it once it ran.
  if (slot.start) driver_.event_destroy(slot.start);
  if (slot.end) driver_.event_destroy(slot.end);
  slot.start = slot.end = nullptr;
  slot.ctx = nullptr;
}

int StreamTimer::last_on(const StreamKey& key) {
  for (LastOnStream& s : streams_)
    if (s.key == key) {
      s.used = begun_;
      return s.slot;
    }
  return -1;
}

void StreamTimer::set_last(const StreamKey& key, int slot) {
  auto it = std::find_if(streams_.begin(), streams_.end(),
                         [&](const LastOnStream& s) { return s.key == key; });
  if (it == streams_.end() && streams_.size() < kStreams) {
    streams_.push_back({key, -1, 0});
    it = streams_.end() - 1;
  } else if (it == streams_.end()) {  // the stream timed least recently makes room
    it = std::min_element(
        streams_.begin(), streams_.end(),
        [](const LastOnStream& a, const LastOnStream& b) { return a.used < b.used; });
  }
  const int old = it->slot;
  *it = {key, slot, begun_};
  slots_[static_cast<std::size_t>(slot)].last = true;
  if (old >= 0 && old != slot) {
    slots_[static_cast<std::size_t>(old)].last = false;
    release_if_unused(old);
  }
}

void StreamTimer::release_if_unused(int i) {
  Slot& slot = slots_[static_cast<std::size_t>(i)];
  if (slot.state != State::Done || slot.after > 0 || slot.last) return;
  if (slot.broken) drop_events(slot);
  slot.broken = false;
  slot.state = State::Free;
}

void StreamTimer::unlink_before(Slot& slot) {
  if (slot.before < 0) return;
  const int before = slot.before;
  slot.before = -1;
  --slots_[static_cast<std::size_t>(before)].after;
  release_if_unused(before);
}

}  // namespace cmt
