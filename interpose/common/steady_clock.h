// The steady clock in nanoseconds, as one integer: how the engine, the pool's gap guess and the
// warm gate stamp times they compare and store in atomics.
#pragma once

#include <chrono>
#include <cstdint>

namespace cmt {

inline std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace cmt
