#include "engine/device/pipeline.h"

#include "common/log.h"

namespace cmt {

SlotState Pipeline::slot_free(std::size_t p) {
  StagingSlot& slot = ring_.slot(base_ + p);
  const CUresult r = ring_.poll_idle(slot);
  if (r == CUDA_ERROR_NOT_READY)
    return stall_.expired(slot, req_.stream) ? SlotState::Stop : SlotState::Busy;
  if (failed(r, "the event of a staging slot")) return SlotState::Stop;
  stall_.progress();
  return SlotState::Free;
}

SlotState Pipeline::landed(std::size_t p) {
  const CUresult r = ring_.poll_idle(ring_.slot(base_ + p));
  if (r == CUDA_ERROR_NOT_READY) return SlotState::Busy;
  return failed(r, "the event of a landing piece") ? SlotState::Stop : SlotState::Free;
}

bool Pipeline::enqueue_dma(std::size_t p, bool* enqueued) {
  StagingSlot& slot = ring_.slot(base_ + p);
  const CUdeviceptr device = req_.device + layout_.piece_offset(p);
  const std::size_t length = layout_.piece_length(p);
  *enqueued = false;
  {
    CopyTrace::InDriver timing(trace_);
    const bool failed =
        req_.direction == Direction::HostToDevice
            ? CMT_CUDA_FAILED(driver_,
                              driver_.memcpy_htod_async(device, slot.data, length, req_.stream),
                              status_)
            : CMT_CUDA_FAILED(driver_,
                              driver_.memcpy_dtoh_async(slot.data, device, length, req_.stream),
                              status_);
    if (failed) return false;
  }
  *enqueued = true;
  if (first_enqueue_ns_ < 0) first_enqueue_ns_ = steady_now_ns();
  bool recorded = false;
  {
    CopyTrace::InDriver timing(trace_);
    recorded = !CMT_CUDA_FAILED(driver_, driver_.event_record(slot.dma_done, req_.stream), status_);
  }
  trace_.mark_once(trace_.first_dma_us);
  trace_.dma_enqueued();
  if (recorded) {
    slot.dma_pending = true;
    slot.dma_stream = req_.stream;
    return true;
  }
  CUresult drained = CUDA_SUCCESS;
  if (CMT_CUDA_FAILED(driver_, driver_.stream_synchronize(req_.stream), drained))
    ring_.mark_broken();
  return false;
}

void Pipeline::pace(bool progress) {
  if (progress || pool_.help())
    backoff_.reset();
  else
    backoff_.pause();
}

bool Pipeline::failed(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return false;
  ring_.mark_broken();
  status_ = r;
  CMT_LOG(debug, "querying {} failed: {}; the ring is given up", what, cuda_error_text(driver_, r));
  return true;
}

}  // namespace cmt
