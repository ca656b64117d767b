#include "engine/shared/pinned_budget.h"

#include <unistd.h>

namespace cmt {

std::size_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                               : std::size_t{1} << 30;
}

PinnedBudget& PinnedBudget::process() {
  static auto* budget = new PinnedBudget(physical_memory() / rules::kPinnedShare);  // leaked: see the header
  return *budget;
}

PinnedBudget::Hold PinnedBudget::take(std::size_t bytes) {
  std::size_t now = taken_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || now > limit_ - bytes) return {};
  } while (!taken_.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
  return Hold(this, bytes);
}

void PinnedBudget::Hold::release() {
  if (budget_) budget_->taken_.fetch_sub(bytes_, std::memory_order_relaxed);
  budget_ = nullptr;
  bytes_ = 0;
}

}  // namespace cmt
