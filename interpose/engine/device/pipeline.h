// The issuer's side of one copy, shared by both directions: whether a staging slot is free for
// the next piece, enqueuing a piece's DMA between its slot and the device on the caller's
// stream, whether a piece's DMA has landed, and what a turn of the loop that found nothing to do
// does. The engine's two loops (copy_engine.cpp) differ only in the order they ask these.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "common/copy_types.h"
#include "common/steady_clock.h"
#include "cuda/driver_api.h"
#include "engine/device/copy_plan.h"
#include "engine/device/copy_trace.h"
#include "engine/shared/staging_ring.h"
#include "engine/shared/worker_pool.h"

namespace cmt {

// A slot still busy with a DMA on *another* stream may wait on work that only this caller can
// release (a cross-stream event). Past this long without progress the engine stops and lets CUDA
// finish the copy, so it can never deadlock where plain CUDA would not.
constexpr auto kForeignStallLimit = std::chrono::milliseconds(100);

// Tracks how long the issuer has waited on a slot owned by another stream.
class StallClock {
 public:
  bool expired(const StagingSlot& slot, CUstream stream) {
    if (slot.dma_stream == stream) {
      started_ = false;
      return false;
    }
    auto now = std::chrono::steady_clock::now();
    if (!started_) {
      started_ = true;
      since_ = now;
    }
    return now - since_ > kForeignStallLimit;
  }
  void progress() { started_ = false; }

 private:
  bool started_ = false;
  std::chrono::steady_clock::time_point since_;
};

enum class SlotState { Free, Busy, Stop };

// Whatever stops the copy is kept in status() (CUDA_SUCCESS when the issuer merely declined to
// wait on another stream).
// Piece p of a copy whose first ticket is `base` passes through slot (base + p) of the ring: a
// lane's tickets count its pieces, so each copy starts in the slot after the previous copy's
// last, whose DMA went in longest ago. (Starting every copy at slot 0 made a copy that follows
// one of more pieces than slots wait, before its first piece, for one of that copy's last DMAs:
// copies taking turns on a lane could not overlap one's staging with the last one's DMAs.)
class Pipeline {
 public:
  Pipeline(const DriverApi& driver, StagingRing& ring, WorkQueue& pool, const CopyRequest& req,
           const CopyLayout& layout, std::uint64_t base, CopyTrace& trace)
      : driver_(driver),
        ring_(ring),
        pool_(pool),
        req_(req),
        layout_(layout),
        base_(base),
        trace_(trace) {}

  // Before piece `p` takes its slot: free once the slot's last DMA has finished. Waiting too long
  // on a DMA of another stream (StallClock), or a driver error (the ring is then broken): Stop.
  SlotState slot_free(std::size_t p);

  // D2H: whether the DMA of piece `p`, on the caller's own stream, has landed in its slot.
  SlotState landed(std::size_t p);

  // Enqueues the DMA of piece `p` on the caller's stream and records its slot's event. False if
  // the copy must stop; `*enqueued` says whether the DMA itself went in (only the event may
  // have failed: then the stream was drained, so the slot is safe, or the ring is broken).
  bool enqueue_dma(std::size_t p, bool* enqueued);

  // The end of a turn of the loop: an issuer that found nothing to issue copies a unit for the
  // workers rather than spin, and backs off when there is none.
  void pace(bool progress);

  CUresult status() const { return status_; }
  // When the first DMA went in (steady clock, ns), or -1.
  std::int64_t first_enqueue_ns() const { return first_enqueue_ns_; }

 private:
  bool failed(CUresult r, const char* what);

  const DriverApi& driver_;
  StagingRing& ring_;
  WorkQueue& pool_;
  const CopyRequest& req_;
  const CopyLayout& layout_;
  const std::uint64_t base_;
  CopyTrace& trace_;
  CUresult status_ = CUDA_SUCCESS;
  std::int64_t first_enqueue_ns_ = -1;
  Backoff backoff_;
  StallClock stall_;
};

}  // namespace cmt
