#include "engine/peer/peer_copier.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include "common/log.h"
#include "engine/shared/gpu_locality.h"

namespace cmt {

struct PeerCopier::Lane {
  explicit Lane(const DriverApi& d) : driver(d) {}
  ~Lane() {  // only once nothing runs on its streams
    for (CUevent e : freed)
      if (e) driver.event_destroy(e);
  }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  const DriverApi& driver;
  CUcontext src_ctx = nullptr, dst_ctx = nullptr;
  // Copies that were handed the lane and have not let go of it (the copier's lanes_mu_): a lane
  // is freed only where none has.
  unsigned users = 0;
  std::mutex mu;  // held while a copy enqueues (a synchronous one: until it has finished)
  // The pinned slots; each slot's dma_done event (in the source context) marks its D2H landed.
  std::unique_ptr<StagingRing> ring;
  CUstream src_stream = nullptr, dst_stream = nullptr;  // one in each context, non-blocking
  CUevent freed[kMaxSlots] = {};  // destination context: the H2D out of slot k has finished
  unsigned next_slot = 0;
  // A driver call failed midway: the lane is retired. Set under `mu`, read under the copier's
  // lanes lock too, hence atomic.
  std::atomic<bool> broken{false};
};

std::size_t PeerCopier::piece_bytes(std::size_t index, std::size_t remaining,
                                    const PeerShape& shape) {
  constexpr std::size_t kStep = std::size_t{64} << 10;
  std::size_t size = shape.slot_bytes;
  if (index < 16) size = std::min(shape.slot_bytes, shape.first_piece << index);
  if (remaining < 2 * size) size = std::max(shape.first_piece, remaining / 2 / kStep * kStep);
  return std::min(size, remaining);
}

namespace {
// A shape a lane can be built with: 2 to kMaxSlots slots of at least a page, and a first piece
// no larger than a slot (no piece may be).
PeerShape usable(PeerShape s, unsigned max_slots) {
  s.slots = std::max(2u, std::min(s.slots, max_slots));
  s.slot_bytes = std::max<std::size_t>(s.slot_bytes, 4096);
  s.first_piece = std::min(std::max<std::size_t>(s.first_piece, 4096), s.slot_bytes);
  return s;
}
}  // namespace

PeerCopier::PeerCopier(const DriverApi& driver, PeerShape shape, PinnedBudget& budget)
    : driver_(driver), shape_(usable(shape, kMaxSlots)), budget_(budget) {}

PeerCopier::~PeerCopier() {
  // Tests build and destroy copiers; libcmt.so's lives as long as the process. A lane is freed
  // (its slots unregistered) only once nothing runs on its streams; one whose streams cannot say
  // so is leaked.
  auto free_if_drained = [&](std::unique_ptr<Lane>& lane) {
    if (lane && (driver_.stream_synchronize(lane->src_stream) != CUDA_SUCCESS ||
                 driver_.stream_synchronize(lane->dst_stream) != CUDA_SUCCESS))
      (void)lane.release();
  };
  for (auto& [pair, lane] : lanes_) free_if_drained(lane);
  for (auto& lane : retired_) free_if_drained(lane);
}

PeerCopier::Lane* PeerCopier::lane_for(CUcontext src_ctx, CUcontext dst_ctx, CUresult* error) {
  std::lock_guard<std::mutex> lk(lanes_mu_);
  std::unique_ptr<Lane>& held = lanes_[{src_ctx, dst_ctx}];
  if (held && !held->broken) {
    ++held->users;
    return held.get();
  }
  // A broken lane may still have DMAs in flight into or out of its slots: retired, not freed.
  if (held) retired_.push_back(std::move(held));
  const std::size_t ring_bytes = std::size_t{shape_.slots} * shape_.slot_bytes;
  PinnedBudget::Hold hold = budget_.take(ring_bytes);
  if (!hold) {
    CMT_LOG(debug, "no peer lane {} -> {}: its {} MiB would take cmt's pinned memory past {} MiB",
            static_cast<void*>(src_ctx), static_cast<void*>(dst_ctx), ring_bytes >> 20,
            budget_.limit() >> 20);
    *error = CUDA_ERROR_OUT_OF_MEMORY;
    return nullptr;
  }
  RelaxedCaptureMode relaxed(driver_);
  auto lane = std::make_unique<Lane>(driver_);
  lane->src_ctx = src_ctx;
  lane->dst_ctx = dst_ctx;
  *error = CUDA_SUCCESS;
  {
    ScopedContext in(driver_, src_ctx);
    if (!in.ok()) {
      *error = CUDA_ERROR_INVALID_CONTEXT;
      return nullptr;
    }
    // Near the source GPU: its D2H writes the slots, and the destination only reads them.
    lane->ring = StagingRing::create(driver_, shape_.slots, shape_.slot_bytes,
                                     gpu_locality(current_gpu_bus_id(driver_)).numa_node,
                                     std::move(hold), error);
    if (!lane->ring) return nullptr;
    if (CMT_CUDA_FAILED(driver_, driver_.stream_create(&lane->src_stream, CU_STREAM_NON_BLOCKING),
                        *error))
      return nullptr;
  }
  {
    ScopedContext in(driver_, dst_ctx);
    if (!in.ok()) {
      *error = CUDA_ERROR_INVALID_CONTEXT;
      return nullptr;
    }
    if (CMT_CUDA_FAILED(driver_, driver_.stream_create(&lane->dst_stream, CU_STREAM_NON_BLOCKING),
                        *error))
      return nullptr;
    for (unsigned k = 0; k < shape_.slots; ++k)
      if (CMT_CUDA_FAILED(driver_, driver_.event_create(&lane->freed[k], CU_EVENT_DISABLE_TIMING),
                          *error))
        return nullptr;
  }
  CMT_LOG(debug, "peer lane {} -> {}: {} pinned slots of {} KiB", static_cast<void*>(src_ctx),
          static_cast<void*>(dst_ctx), shape_.slots, shape_.slot_bytes >> 10);
  held = std::move(lane);
  ++held->users;
  return held.get();
}

void PeerCopier::release(Lane& lane) {
  std::lock_guard<std::mutex> lk(lanes_mu_);
  --lane.users;
}

unsigned PeerCopier::forget_context(CUcontext ctx, bool alive) {
  std::vector<std::unique_ptr<Lane>> gone;
  unsigned named = 0;
  {
    std::lock_guard<std::mutex> lk(lanes_mu_);
    // Let go of the lane in `slot`; a copy holding it sees it broken at its next lane_for. One
    // held is leaked, not freed: that copy may still enqueue on its handles.
    auto let_go = [&](std::unique_ptr<Lane>& slot) {
      slot->broken = true;
      if (slot->users == 0)
        gone.push_back(std::move(slot));
      else
        (void)slot.release();
    };
    for (auto it = lanes_.begin(); it != lanes_.end();) {
      if (it->first.first != ctx && it->first.second != ctx) {
        ++it;
        continue;
      }
      if (it->second) {
        let_go(it->second);
        ++named;
      }
      it = lanes_.erase(it);
    }
    // Retired lanes too: their handles of `ctx` must not reach CUDA once it has ended.
    for (auto it = retired_.begin(); it != retired_.end();) {
      if ((*it)->src_ctx != ctx && (*it)->dst_ctx != ctx) {
        ++it;
        continue;
      }
      let_go(*it);
      it = retired_.erase(it);
    }
  }
  for (auto& lane : gone) free_lane(std::move(lane), alive ? nullptr : ctx);
  return named;
}

void PeerCopier::free_lane(std::unique_ptr<Lane> lane, CUcontext ended) {
  const DriverApi& d = driver_;
  RelaxedCaptureMode relaxed(d);
  Lane& l = *lane;
  // Runs `body` with `ctx` current; false where it is the ended one or cannot be made current.
  auto in = [&](CUcontext ctx, auto&& body) {
    if (ctx == ended) return false;
    ScopedContext scope(d, ctx);
    if (!scope.ok()) return false;
    body();
    return true;
  };
  // The work queued on a stream of the ended context ended with it (the driver finishes or
  // drops it as it destroys the context); a stream of a living one is waited for.
  auto drained = [&](CUcontext ctx, CUstream stream) {
    if (!stream || ctx == ended) return true;
    bool done = false;
    in(ctx, [&] { done = d.stream_synchronize(stream) == CUDA_SUCCESS; });
    return done;
  };
  if (!drained(l.src_ctx, l.src_stream) || !drained(l.dst_ctx, l.dst_stream)) {
    CMT_LOG(debug, "a peer lane {} -> {} could not be drained: leaked",
            static_cast<void*>(l.src_ctx), static_cast<void*>(l.dst_ctx));
    (void)lane.release();
    return;
  }
  // The destination's handles: its events and stream.
  in(l.dst_ctx, [&] {
    for (CUevent& e : l.freed)
      if (e) d.event_destroy(e);
    if (l.dst_stream) d.stream_destroy(l.dst_stream);
  });
  for (CUevent& e : l.freed) e = nullptr;
  // The source's: its stream, and the ring's events and registration. The ring of an ended
  // source forgets its events, and its memory, cmt's own mapping, is still unmapped.
  const bool freed_in_source = in(l.src_ctx, [&] {
    if (l.src_stream) d.stream_destroy(l.src_stream);
    l.ring.reset();
  });
  if (!freed_in_source && l.ring) l.ring->orphan();
  l.ring.reset();
}

PeerOutcome PeerCopier::copy(const PeerRequest& request) noexcept {
  try {
    PeerOutcome out;
    for (int attempt = 0; attempt < 2; ++attempt) {
      Lane* lane = lane_for(request.src_ctx, request.dst_ctx, &out.status);
      if (!lane) return out;
      struct Release {
        PeerCopier& copier;
        Lane& lane;
        ~Release() { copier.release(lane); }
      } release{*this, *lane};
      std::lock_guard<std::mutex> hold(lane->mu);
      if (lane->broken) continue;  // another caller broke it meanwhile: a new one
      return run(*lane, request);
    }
    return out;
  } catch (...) {
    return {};
  }
}

PeerOutcome PeerCopier::run(Lane& lane, const PeerRequest& r) {
  const DriverApi& d = driver_;
  RelaxedCaptureMode relaxed(d);
  const auto t0 = std::chrono::steady_clock::now();
  PeerOutcome out;
  CUresult& st = out.status;
  CUcontext caller = nullptr;
  if (CMT_CUDA_FAILED(d, d.ctx_get_current(&caller), st)) return out;

  // `ctx` current for the calls in `body` (a lambda returning whether they all succeeded).
  auto in_context = [&](CUcontext ctx, auto&& body) {
    ScopedContext in(d, ctx);
    if (!in.ok()) {
      st = CUDA_ERROR_INVALID_CONTEXT;
      return false;
    }
    return body();
  };
  // Marks where `r.stream` stands in `ctx` and has `waiter` (a lane stream) wait for it. The
  // event is the call's own: one event recorded on different callers' streams could complete out
  // of order, and a wait for the earlier record end too soon. Destroying it once the wait is
  // queued is allowed (CUDA releases it when it completes).
  auto start_after = [&](CUcontext ctx, CUcontext waiter_ctx, CUstream waiter) {
    CUevent event = nullptr;
    const bool queued =
        in_context(ctx, [&] {
          return !CMT_CUDA_FAILED(d, d.event_create(&event, CU_EVENT_DISABLE_TIMING), st) &&
                 !CMT_CUDA_FAILED(d, d.event_record(event, r.stream), st);
        }) &&
        in_context(waiter_ctx,
                   [&] { return !CMT_CUDA_FAILED(d, d.stream_wait_event(waiter, event, 0), st); });
    if (event) d.event_destroy(event);
    return queued;
  };

  // 1. After the work queued before: on the caller's stream, or for a synchronous copy on the
  // default stream of each context it touches (and the caller's, waited for here).
  bool ok;
  if (r.synchronous) {
    ok = start_after(r.src_ctx, r.src_ctx, lane.src_stream) &&
         start_after(r.dst_ctx, r.dst_ctx, lane.dst_stream);
    if (ok && caller != r.src_ctx && caller != r.dst_ctx)
      ok = !CMT_CUDA_FAILED(d, d.stream_synchronize(r.stream), st);
  } else {
    ok = start_after(r.stream_ctx, r.src_ctx, lane.src_stream);
  }
  if (!ok) {
    lane.broken = true;  // its streams may wait on an event in doubt
    return out;
  }

  // 2. The pieces: D2H into slot k once its last H2D has finished; H2D out of it once it landed.
  std::size_t off = 0, pieces = 0;
  unsigned last = 0;
  while (off < r.bytes && ok) {
    const std::size_t n = piece_bytes(pieces, r.bytes - off, shape_);
    const unsigned k = lane.next_slot;
    StagingSlot& slot = lane.ring->slot(k);
    ok = in_context(r.src_ctx,
                    [&] {
                      return !CMT_CUDA_FAILED(
                                 d, d.stream_wait_event(lane.src_stream, lane.freed[k], 0), st) &&
                             !CMT_CUDA_FAILED(
                                 d, d.memcpy_dtoh_async(slot.data, r.src + off, n, lane.src_stream),
                                 st) &&
                             !CMT_CUDA_FAILED(d, d.event_record(slot.dma_done, lane.src_stream), st);
                    }) &&
         in_context(r.dst_ctx, [&] {
           return !CMT_CUDA_FAILED(d, d.stream_wait_event(lane.dst_stream, slot.dma_done, 0), st) &&
                  !CMT_CUDA_FAILED(d, d.memcpy_htod_async(r.dst + off, slot.data, n, lane.dst_stream),
                                   st) &&
                  !CMT_CUDA_FAILED(d, d.event_record(lane.freed[k], lane.dst_stream), st);
         });
    if (!ok) break;
    lane.next_slot = (k + 1) % shape_.slots;
    last = k;
    off += n;
    ++pieces;
  }

  // 3. Before the work queued after: the caller's stream waits for the last H2D (each lane stream
  // runs in order); a synchronous copy is waited for here.
  if (ok) {
    if (r.synchronous)
      ok = !CMT_CUDA_FAILED(d, d.stream_synchronize(lane.dst_stream), st);
    else
      ok = in_context(r.stream_ctx, [&] {
        return !CMT_CUDA_FAILED(d, d.stream_wait_event(r.stream, lane.freed[last], 0), st);
      });
  }
  if (!ok) {
    // What was enqueued is finished before CUDA is handed the rest (or, if even that cannot be
    // known, the whole copy: the same bytes again, and CUDA reports the error).
    lane.broken = true;
    const bool drained = d.stream_synchronize(lane.src_stream) == CUDA_SUCCESS &&
                         d.stream_synchronize(lane.dst_stream) == CUDA_SUCCESS;
    out.bytes_done = drained ? off : 0;
    CMT_LOG(debug, "peer copy of {} bytes stopped after {}: {}", r.bytes, off,
            cuda_error_text(d, st));
    return out;
  }
  out.bytes_done = r.bytes;
  CMT_LOG(debug, "peer copy of {} bytes: {} pieces, {} us in the call{}", r.bytes, pieces,
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
              .count(),
          r.synchronous ? " (synchronous)" : "");
  return out;
}

}  // namespace cmt
