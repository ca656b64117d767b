// A ring of pinned host buffers that copies pass through on their way to or from a GPU. The
// memory is mapped once (2 MiB aligned, in transparent huge pages where the kernel has them: a
// lane's first copy waits for the build), bound to the GPU's NUMA node, pre-faulted (by the copy
// threads where the engine gives them) and registered with the driver; each slot carries an event
// marking when the last DMA touching it has finished.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/driver_api.h"
#include "engine/shared/pinned_budget.h"

namespace cmt {

class WorkQueue;

struct StagingSlot {
  char* data = nullptr;
  CUevent dma_done = nullptr;  // recorded after the last DMA that reads or writes `data`
  bool dma_pending = false;    // dma_done was recorded and not yet seen complete
  CUstream dma_stream = nullptr;
  // Set by the worker that finished with this slot, to the ticket of the piece it handled; the
  // issuer waits for exactly that ticket, so a value left from an earlier copy never matches.
  std::atomic<std::uint64_t> ticket{0};
  std::atomic<std::size_t> units_done{0};  // units of the current piece finished so far
};

// What making a ring took, part by part (a lane's first copy waits for it: lab/NOTES.md 86).
struct RingBuildTimes {
  std::int64_t fault_ns = 0;     // mapping the memory and faulting its pages in
  std::int64_t register_ns = 0;  // registering it with the driver (pinning the pages)
  std::int64_t events_ns = 0;    // one event per slot
};

class StagingRing {
 public:
  // Allocates `slots` buffers of `slot_bytes` each, their bytes taken from the pinned budget
  // beforehand (`hold`, given back when the ring is freed). Returns nullptr and sets *error on
  // failure (everything allocated so far is released). Must be called with the owning context
  // current. With `fault_on`, the memory's 2 MiB blocks are faulted in by that queue's threads,
  // one block each, where the kernel can populate (a ring faulted on one thread is most of its
  // build: lab/NOTES.md 88); without, or where it cannot, by the calling thread.
  static std::unique_ptr<StagingRing> create(const DriverApi& driver, unsigned slots,
                                             std::size_t slot_bytes, int numa_node,
                                             PinnedBudget::Hold hold, CUresult* error,
                                             WorkQueue* fault_on = nullptr);
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  std::size_t slot_bytes() const { return slot_bytes_; }
  unsigned size() const { return static_cast<unsigned>(slots_.size()); }
  StagingSlot& slot(std::size_t i) { return *slots_[i % slots_.size()]; }

  // Non-blocking: CUDA_SUCCESS once the slot has no DMA in flight, CUDA_ERROR_NOT_READY while it
  // has, or the driver's error.
  CUresult poll_idle(StagingSlot& s);

  const RingBuildTimes& build_times() const { return build_times_; }

  // Its context has ended, and the driver destroyed the slots' events with it: they are
  // forgotten, so that freeing the ring makes no call on a handle the driver may since have
  // given to a new object. The memory (cmt's own mapping) is unregistered by its address, which
  // is harmless where the registration went with the context, and then unmapped.
  void orphan();
  // Marks the ring unusable (a driver error left its events in doubt); the engine replaces it.
  void mark_broken() { broken_ = true; }
  bool broken() const { return broken_; }

 private:
  StagingRing(const DriverApi& driver) : driver_(driver) {}

  const DriverApi& driver_;
  std::vector<std::unique_ptr<StagingSlot>> slots_;
  void* memory_ = nullptr;
  std::size_t mapped_bytes_ = 0;
  bool registered_ = false;
  std::size_t slot_bytes_ = 0;
  bool broken_ = false;
  PinnedBudget::Hold hold_;
  RingBuildTimes build_times_;
};

}  // namespace cmt
