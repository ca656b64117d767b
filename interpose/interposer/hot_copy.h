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

// Pinned slots of two pages each (a copy's head and tail, or a whole small copy), made on first
// use, for every context at once (pinned memory is, with unified addressing). Thread-safe.
class EdgeScratch {
 public:
  explicit EdgeScratch(const DriverApi& driver) : driver_(driver) {}
  EdgeScratch(const EdgeScratch&) = delete;
  EdgeScratch& operator=(const EdgeScratch&) = delete;

  // A slot's size: head() and tail() are one stretch of two pages.
  static std::size_t slot_bytes();

  // One slot, held for one copy; empty if there is no pinned memory for it.
  class Slot {
   public:
    explicit Slot(EdgeScratch& scratch);
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    explicit operator bool() const { return at_ != nullptr; }
    char* head() const { return at_; }
    char* tail() const { return at_ + page_; }

   private:
    EdgeScratch& scratch_;
    char* at_ = nullptr;
    int index_ = -1;
    std::size_t page_ = 0;
  };

 private:
  static constexpr int kSlots = 64;
  char* memory();  // nullptr if it could not be had
  const DriverApi& driver_;
  std::mutex making_;
  std::atomic<char*> memory_{nullptr};
  std::atomic<bool> failed_{false};
  std::atomic<std::uint64_t> taken_{0};  // a bit per slot
};

// The copy `r` (its host side inside a registration whose pages are [page_lo, page_hi)), then a
// wait for the caller's stream. Bytes of the copy outside those pages (less than a page at each
// end) go through `scratch`.
CUresult copy_registered(const DriverApi& driver, const CopyRequest& r, std::uintptr_t page_lo,
                         std::uintptr_t page_hi, EdgeScratch& scratch);

// A copy `r` too small to be a candidate whose host side shares a page with a registration of
// cmt's (a layer norm's weight beside a registered matrix in the heap), made whole through a slot
// of `scratch` and waited for: CUDA's pageable path would meet the neighbour's pinned page, and
// handing the page back would drop the neighbour's registration at every pass. Copies larger than
// a slot (slot_bytes()) return CUDA_ERROR_INVALID_VALUE without a driver call.
CUresult copy_beside_registered(const DriverApi& driver, const CopyRequest& r,
                                EdgeScratch& scratch);

}  // namespace cmt
