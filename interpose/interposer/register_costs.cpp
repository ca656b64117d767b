#include "interposer/register_costs.h"

#include <algorithm>

namespace cmt {
namespace {

// Each new measurement moves an estimate this far towards itself: a few measurements settle it,
// one outlier (a registration that met a busy driver) does not.
constexpr double kWeight = 0.25;

void move_towards(std::atomic<double>& estimate, double measured, double lo, double hi) {
  const double now = estimate.load(std::memory_order_relaxed);
  estimate.store(std::clamp(now + kWeight * (measured - now), lo, hi), std::memory_order_relaxed);
}

double prior_register_ns(std::size_t bytes) {
  return RegisterCosts::kRegisterFixedNs +
         RegisterCosts::kRegisterNsPerByte * static_cast<double>(bytes);
}

// The size class of a copy of `bytes`: its power of two.
int size_class(std::size_t bytes) {
  return bytes ? 63 - __builtin_clzll(static_cast<unsigned long long>(bytes)) : 0;
}

}  // namespace

bool RegisterCosts::time_this(bool to_device, std::size_t bytes, bool hot) {
  const std::uint32_t n = seen_[hot ? 1 : 0][to_device ? 0 : 1][size_class(bytes)].fetch_add(
      1, std::memory_order_relaxed);
  return n < kFirstTimed || n % kTimeEvery == 0;
}

void RegisterCosts::staged_timed(bool to_device, std::size_t bytes, std::uint64_t ns) {
  if (!bytes) return;
  timed_.fetch_add(1, std::memory_order_relaxed);
  std::atomic<double>& estimate = staged_ns_per_byte_[to_device ? 0 : 1][size_class(bytes)];
  const double measured = static_cast<double>(ns) / static_cast<double>(bytes);
  if (estimate.load(std::memory_order_relaxed) == 0)
    estimate.store(measured, std::memory_order_relaxed);  // the first: taken as it is
  else
    move_towards(estimate, measured, 0.0, 1e12);
}

double RegisterCosts::expected_loss_ns(bool to_device, std::size_t bytes) const {
  const double per_byte =
      staged_ns_per_byte_[to_device ? 0 : 1][size_class(bytes)].load(std::memory_order_relaxed);
  if (per_byte <= 0) return -1;
  const double hot = hot_copy_ns(bytes);
  return std::clamp(per_byte * static_cast<double>(bytes) - hot, 0.0, kMostLossTimes * hot);
}

double RegisterCosts::register_ns(std::size_t bytes) const {
  return register_scale_.load(std::memory_order_relaxed) * prior_register_ns(bytes);
}

double RegisterCosts::hot_copy_ns(std::size_t bytes) const {
  return latency_ns_.load(std::memory_order_relaxed) +
         static_cast<double>(bytes) / bytes_per_ns_.load(std::memory_order_relaxed);
}

double RegisterCosts::lost_ns(std::size_t bytes, std::uint64_t call_ns) const {
  const double hot = hot_copy_ns(bytes);
  return std::clamp(static_cast<double>(call_ns) - hot, 0.0, kMostLossTimes * hot);
}

void RegisterCosts::registered(std::size_t bytes, std::uint64_t ns) {
  move_towards(register_scale_, static_cast<double>(ns) / prior_register_ns(bytes), 0.05, 50.0);
}

void RegisterCosts::hot_copied(std::size_t bytes, std::uint64_t ns) {
  const double t = static_cast<double>(ns);
  if (bytes <= (256u << 10)) {
    // Mostly latency: what the bytes at the link's rate leave of it.
    move_towards(latency_ns_, t - static_cast<double>(bytes) / bytes_per_ns_.load(), 1e3, 1e6);
  } else if (bytes >= (4u << 20)) {
    const double moving = t - latency_ns_.load(std::memory_order_relaxed);
    if (moving > 0) move_towards(bytes_per_ns_, static_cast<double>(bytes) / moving, 1.0, 1000.0);
  }
}

}  // namespace cmt
