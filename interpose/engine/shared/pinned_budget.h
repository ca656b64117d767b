// The process's one budget of pinned (page-locked) host memory. Pinned pages cannot be swapped
// out, so every staging buffer cmt pins, the device copier's rings and the peer copier's alike,
// draws on one limit: a share of the machine's memory. A ring takes its bytes before it maps
// anything and gives them back when it is freed; a ring that is leaked (a DMA may still touch it)
// keeps them for good, so a failing driver cannot make cmt pin without end.
#pragma once

#include <atomic>
#include <cstddef>
#include <utility>

#include "common/engine_rules.h"

namespace cmt {

// The machine's physical memory (1 GiB where it cannot be read).
std::size_t physical_memory();

class PinnedBudget {
 public:
  explicit PinnedBudget(std::size_t limit) : limit_(limit) {}
  PinnedBudget(const PinnedBudget&) = delete;
  PinnedBudget& operator=(const PinnedBudget&) = delete;

  // The process's: physical_memory() / rules::kPinnedShare. Never destroyed.
  static PinnedBudget& process();

  // Bytes of the budget, held until the Hold is destroyed (or kept for good).
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept { *this = std::move(other); }
    Hold& operator=(Hold&& other) noexcept {
      release();
      budget_ = std::exchange(other.budget_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      return *this;
    }
    ~Hold() { release(); }
    explicit operator bool() const { return budget_ != nullptr; }
    std::size_t bytes() const { return bytes_; }
    // The bytes stay taken for the life of the process (their memory was leaked).
    void keep() { budget_ = nullptr; }

   private:
    friend class PinnedBudget;
    Hold(PinnedBudget* budget, std::size_t bytes) : budget_(budget), bytes_(bytes) {}
    void release();
    PinnedBudget* budget_ = nullptr;
    std::size_t bytes_ = 0;
  };

  // Takes `bytes`, or nothing (an empty Hold) if they would take the process past the limit.
  Hold take(std::size_t bytes);
  std::size_t limit() const { return limit_; }
  std::size_t taken() const { return taken_.load(std::memory_order_relaxed); }

 private:
  const std::size_t limit_;
  std::atomic<std::size_t> taken_{0};
};

}  // namespace cmt
