// Which address ranges are CUDA host memory: what cudaHostAlloc, cudaMallocHost, cuMemHostAlloc,
// cuMemAllocHost and the host-register calls handed out or pinned, recorded by their hooks and
// forgotten by the frees and unregisters. The memcpy hook asks it, for large calls only, whether a
// copy fills or empties such memory (a library's own pinned staging). Lookups take no lock and
// never allocate, so they are safe inside malloc (realloc copies with memcpy) and in signal
// handlers; a lookup racing an add or remove of the same range may answer either way, and both
// answers copy the same bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace cmt {

class HostMemoryMap {
 public:
  static constexpr std::size_t kCapacity = 4096;  // ranges tracked at once; more are not tracked

  // Records [base, base + bytes), handed out or registered in `context` (the CUcontext current
  // then); a base already recorded gets the new size and context. False when full.
  bool add(const void* base, std::size_t bytes, const void* context = nullptr);
  // Forgets the range that starts at `base`, if one does.
  void remove(const void* base);
  // Forgets every range recorded in `context`, which ends: the driver frees its host memory and
  // drops its registrations with it, and the addresses may be mapped afresh as pageable memory.
  // Returns how many.
  std::size_t forget_context(const void* context);
  // Whether [p, p + bytes) overlaps a recorded range.
  bool overlaps(const void* p, std::size_t bytes) const;
  std::size_t size() const;

 private:
  struct Range {
    std::atomic<std::uintptr_t> begin{0}, end{0};  // begin == 0: a free entry
    const void* context = nullptr;                 // read and written under write_mu_ only
  };
  Range ranges_[kCapacity];
  std::atomic<std::size_t> high_{0};  // entries at or past this index have never been used
  std::mutex write_mu_;
};

// The process's map, filled by the host-memory hooks.
HostMemoryMap& cuda_host_memory();

}  // namespace cmt
