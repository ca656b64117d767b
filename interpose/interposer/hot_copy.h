// A copy between a GPU and a hot buffer's registration (register_cache.h), made as the caller of
// a pageable copy expects it: enqueued on the caller's stream and waited for, since the caller
// may write or free the buffer as soon as the call returns.
//
// The bytes on the registered pages go straight to the DMA engine. Where the registration leaves
// out an end page of the range (a neighbour's registration holds it: CUDA registers a page once),
// the copy's bytes on that page go through a slot of pinned scratch instead: never to CUDA from
// pageable memory, whose path would meet the neighbour's registration and not wait.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "common/copy_types.h"
#include "cuda/driver_api.h"

namespace cmt {

// Slots of pinned scratch, made on first use, for every context at once (pinned memory is, with
// unified addressing). Each slot is held for one copy; a copy that finds every slot held waits for
// one (each is held for one copy only). Thread-safe.
class PinnedScratch {
 public:
  static constexpr int kMostSlots = 64;
  // `slots` (1 to kMostSlots) slots of `slot_bytes` each, rounded up to whole pages.
  PinnedScratch(const DriverApi& driver, std::size_t slot_bytes, int slots);
  PinnedScratch(const PinnedScratch&) = delete;
  PinnedScratch& operator=(const PinnedScratch&) = delete;

  std::size_t slot_bytes() const { return slot_bytes_; }
  // `ctx` ends: if the scratch was allocated in it, the driver frees it with it, and the next
  // slot taken allocates anew in the context current then.
  void forget_context(CUcontext ctx);

  // One slot, held for one copy; empty if there is no pinned memory for it.
  class Slot {
   public:
    explicit Slot(PinnedScratch& scratch);
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    explicit operator bool() const { return at_ != nullptr; }
    char* at() const { return at_; }
    // For a slot of two pages or more, a copy's head and tail: its first page and the next.
    char* head() const { return at_; }
    char* tail() const { return at_ + page_; }

   private:
    PinnedScratch& scratch_;
    char* at_ = nullptr;
    int index_ = -1;
    std::size_t page_ = 0;
  };

 private:
  char* memory();  // nullptr if it could not be had
  const DriverApi& driver_;
  const std::size_t slot_bytes_;
  const int slots_;
  std::mutex making_;
  std::atomic<char*> memory_{nullptr};
  CUcontext context_ = nullptr;  // current when memory_ was allocated; under making_
  std::atomic<bool> failed_{false};
  std::atomic<std::uint64_t> taken_{0};  // a bit per slot
};

// The copy `r` (its host side inside a registration whose pages are [page_lo, page_hi)), then a
// wait for the caller's stream. Bytes of the copy outside those pages (less than a page at each
// end) go through `scratch`, whose slots must be two pages or more.
CUresult copy_registered(const DriverApi& driver, const CopyRequest& r, std::uintptr_t page_lo,
                         std::uintptr_t page_hi, PinnedScratch& scratch);

// A copy `r` too small to be a candidate whose host side shares a page with a registration of
// cmt's (a layer norm's weight beside a registered matrix in the heap), made whole through a slot
// of `scratch` and waited for: CUDA's pageable path would meet the neighbour's pinned page, and
// handing the page back would drop the neighbour's registration at every pass. Copies larger than
// a slot (scratch.slot_bytes()) return CUDA_ERROR_INVALID_VALUE without a driver call.
CUresult copy_beside_registered(const DriverApi& driver, const CopyRequest& r,
                                PinnedScratch& scratch);

}  // namespace cmt
