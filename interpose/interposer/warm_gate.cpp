#include "interposer/warm_gate.h"

namespace cmt {

bool WarmGate::admit(std::int64_t now_ns) {
  const std::int64_t awake = awake_ns_.load(std::memory_order_relaxed);
  if (awake <= 0) return false;
  const std::int64_t previous = last_offer_.exchange(now_ns, std::memory_order_relaxed);
  const unsigned run = now_ns - previous < awake ? run_.fetch_add(1, std::memory_order_relaxed) + 1
                                                 : (run_.store(0, std::memory_order_relaxed), 0u);
  return now_ns < awake_until_.load(std::memory_order_relaxed) || run >= kDenseRun;
}

}  // namespace cmt
