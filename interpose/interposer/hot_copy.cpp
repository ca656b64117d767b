#include "interposer/hot_copy.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace cmt {
namespace {

std::size_t page_size() {
  static const auto size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

CUresult enqueue(const DriverApi& driver, const CopyRequest& r, CUdeviceptr device, void* host,
                 std::size_t bytes) {
  return r.direction == Direction::HostToDevice
             ? driver.memcpy_htod_async(device, host, bytes, r.stream)
             : driver.memcpy_dtoh_async(host, device, bytes, r.stream);
}

}  // namespace

PinnedScratch::PinnedScratch(const DriverApi& driver, std::size_t slot_bytes, int slots)
    : driver_(driver),
      slot_bytes_((std::max<std::size_t>(slot_bytes, 1) + page_size() - 1) / page_size() *
                  page_size()),
      slots_(std::clamp(slots, 1, kMostSlots)) {}

char* PinnedScratch::memory() {
  if (char* m = memory_.load(std::memory_order_acquire)) return m;
  if (failed_.load(std::memory_order_relaxed)) return nullptr;
  std::lock_guard<std::mutex> lk(making_);
  if (char* m = memory_.load(std::memory_order_acquire)) return m;
  void* p = nullptr;
  if (driver_.mem_alloc_host(&p, static_cast<std::size_t>(slots_) * slot_bytes_) != CUDA_SUCCESS ||
      !p) {
    failed_.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  if (driver_.ctx_get_current(&context_) != CUDA_SUCCESS) context_ = nullptr;
  memory_.store(static_cast<char*>(p), std::memory_order_release);
  return static_cast<char*>(p);
}

void PinnedScratch::forget_context(CUcontext ctx) {
  std::lock_guard<std::mutex> lk(making_);
  if (!memory_.load(std::memory_order_relaxed) || context_ != ctx) return;
  memory_.store(nullptr, std::memory_order_release);
  context_ = nullptr;
}

PinnedScratch::Slot::Slot(PinnedScratch& scratch) : scratch_(scratch), page_(page_size()) {
  char* base = scratch.memory();
  if (!base) return;
  const std::uint64_t all =
      scratch.slots_ == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << scratch.slots_) - 1;
  for (;;) {
    std::uint64_t taken = scratch.taken_.load(std::memory_order_relaxed);
    if ((taken & all) == all) {
      std::this_thread::yield();
      continue;
    }
    const int i = __builtin_ctzll(~taken);
    if (scratch.taken_.compare_exchange_weak(taken, taken | (std::uint64_t{1} << i),
                                             std::memory_order_acquire)) {
      index_ = i;
      at_ = base + static_cast<std::size_t>(i) * scratch.slot_bytes_;
      return;
    }
  }
}

PinnedScratch::Slot::~Slot() {
  if (index_ >= 0)
    scratch_.taken_.fetch_and(~(std::uint64_t{1} << index_), std::memory_order_release);
}

CUresult copy_registered(const DriverApi& driver, const CopyRequest& r, std::uintptr_t page_lo,
                         std::uintptr_t page_hi, PinnedScratch& scratch) {
  const auto lo = reinterpret_cast<std::uintptr_t>(r.host);
  const std::uintptr_t hi = lo + r.bytes;
  if (page_lo <= lo && hi <= page_hi) {  // all of it on registered pages: the usual case
    const CUresult s = enqueue(driver, r, r.device, r.host, r.bytes);
    return s == CUDA_SUCCESS ? driver.stream_synchronize(r.stream) : s;
  }
  // [lo, a) before the registered pages, [a, b) on them, [b, hi) after them.
  const std::uintptr_t a = std::clamp(page_lo, lo, hi), b = std::clamp(page_hi, a, hi);
  PinnedScratch::Slot slot(scratch);
  if (!slot || scratch.slot_bytes() < 2 * page_size() || a - lo > page_size() ||
      hi - b > page_size())
    return CUDA_ERROR_OUT_OF_MEMORY;
  struct Piece {
    std::uintptr_t from, to;
    char* bounce;  // nullptr: straight from the registered pages
  } pieces[3] = {{lo, a, slot.head()}, {a, b, nullptr}, {b, hi, slot.tail()}};
  const bool h2d = r.direction == Direction::HostToDevice;
  CUresult s = CUDA_SUCCESS;
  for (const Piece& p : pieces) {
    if (p.from == p.to || s != CUDA_SUCCESS) continue;
    void* host = reinterpret_cast<void*>(p.from);
    if (h2d && p.bounce) std::memcpy(p.bounce, host, p.to - p.from);
    s = enqueue(driver, r, r.device + (p.from - lo), p.bounce ? p.bounce : host, p.to - p.from);
  }
  // Whatever was enqueued is done before the slot is given back.
  const CUresult waited = driver.stream_synchronize(r.stream);
  if (s == CUDA_SUCCESS) s = waited;
  if (s == CUDA_SUCCESS && !h2d)
    for (const Piece& p : pieces)
      if (p.bounce && p.from != p.to)
        std::memcpy(reinterpret_cast<void*>(p.from), p.bounce, p.to - p.from);
  return s;
}

CUresult copy_beside_registered(const DriverApi& driver, const CopyRequest& r,
                                PinnedScratch& scratch) {
  if (r.bytes > scratch.slot_bytes()) return CUDA_ERROR_INVALID_VALUE;
  PinnedScratch::Slot slot(scratch);
  if (!slot) return CUDA_ERROR_OUT_OF_MEMORY;
  const bool h2d = r.direction == Direction::HostToDevice;
  // On the caller's thread, as CUDA's pageable path copies a small source: a fault here is the
  // program's, where it would have been.
  if (h2d) std::memcpy(slot.at(), r.host, r.bytes);
  CUresult s = enqueue(driver, r, r.device, slot.at(), r.bytes);
  const CUresult waited = s == CUDA_SUCCESS ? driver.stream_synchronize(r.stream) : s;
  if (waited == CUDA_SUCCESS && !h2d) std::memcpy(r.host, slot.at(), r.bytes);
  return waited;
}

}  // namespace cmt
