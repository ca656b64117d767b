#include "interposer/host_memory.h"

namespace cmt {

bool HostMemoryMap::add(const void* base, std::size_t bytes, const void* context) {
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  if (b == 0 || bytes == 0) return false;
  std::lock_guard<std::mutex> lk(write_mu_);
  const std::size_t high = high_.load(std::memory_order_relaxed);
  std::size_t free_slot = kCapacity;
  for (std::size_t i = 0; i < high; ++i) {
    const std::uintptr_t at = ranges_[i].begin.load(std::memory_order_relaxed);
    if (at == b) {
      ranges_[i].end.store(b + bytes, std::memory_order_release);
      ranges_[i].context = context;
      return true;
    }
    if (at == 0 && free_slot == kCapacity) free_slot = i;
  }
  if (free_slot == kCapacity) {
    if (high == kCapacity) return false;
    free_slot = high;
  }
  // The end first: a reader that sees the new begin sees its end.
  ranges_[free_slot].end.store(b + bytes, std::memory_order_release);
  ranges_[free_slot].context = context;
  ranges_[free_slot].begin.store(b, std::memory_order_release);
  if (free_slot == high) high_.store(high + 1, std::memory_order_release);
  return true;
}

void HostMemoryMap::remove(const void* base) {
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  if (b == 0) return;
  std::lock_guard<std::mutex> lk(write_mu_);
  const std::size_t high = high_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < high; ++i)
    if (ranges_[i].begin.load(std::memory_order_relaxed) == b)
      ranges_[i].begin.store(0, std::memory_order_release);
}

std::size_t HostMemoryMap::forget_context(const void* context) {
  std::lock_guard<std::mutex> lk(write_mu_);
  std::size_t n = 0;
  const std::size_t high = high_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < high; ++i)
    if (ranges_[i].begin.load(std::memory_order_relaxed) != 0 && ranges_[i].context == context) {
      ranges_[i].begin.store(0, std::memory_order_release);
      ++n;
    }
  return n;
}

bool HostMemoryMap::overlaps(const void* p, std::size_t bytes) const {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t hi = lo + bytes;
  const std::size_t high = high_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < high; ++i) {
    const std::uintptr_t b = ranges_[i].begin.load(std::memory_order_acquire);
    if (b == 0 || hi <= b) continue;
    if (lo < ranges_[i].end.load(std::memory_order_acquire)) return true;
  }
  return false;
}

std::size_t HostMemoryMap::size() const {
  std::size_t n = 0;
  const std::size_t high = high_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < high; ++i)
    if (ranges_[i].begin.load(std::memory_order_relaxed) != 0) ++n;
  return n;
}

HostMemoryMap& cuda_host_memory() {
  static HostMemoryMap map;  // constant-initialized: ready before any constructor runs
  return map;
}

}  // namespace cmt
