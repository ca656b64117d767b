#include "engine/shared/staging_ring.h"

#include <dlfcn.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "common/log.h"
#include "common/steady_clock.h"
#include "cuda/real_dl.h"
#include "engine/shared/fresh_pages.h"
#include "engine/shared/worker_pool.h"

namespace cmt {

namespace {

using MbindFn = long (*)(void*, unsigned long, int, const unsigned long*, unsigned long, unsigned);

// libnuma's mbind, loaded on first need: a process that never stages a copy never loads libnuma.
MbindFn libnuma_mbind() {
  static MbindFn fn = [] {
    void* lib = dlopen("libnuma.so.1", RTLD_NOW | RTLD_LOCAL);
    return lib ? reinterpret_cast<MbindFn>(real_dlsym(lib, "mbind")) : nullptr;
  }();
  return fn;
}

void bind_to_node(void* memory, std::size_t bytes, int numa_node) {
  constexpr unsigned kMaxNodes = 1024;
  constexpr unsigned kBits = 8 * sizeof(unsigned long);
  if (numa_node < 0 || static_cast<unsigned>(numa_node) >= kMaxNodes) return;
  MbindFn mbind_fn = libnuma_mbind();
  if (!mbind_fn) {
    CMT_WARN_ONCE("libnuma.so.1 not found: staging memory is not bound to the GPU's NUMA node");
    return;
  }
  unsigned long mask[kMaxNodes / kBits] = {};
  mask[numa_node / kBits] |= 1ul << (numa_node % kBits);
  // Preferred, not strict: if the node is full the pages land elsewhere instead of failing.
  if (mbind_fn(memory, bytes, MPOL_PREFERRED, mask, kMaxNodes, 0) != 0)
    CMT_LOG(debug, "mbind to NUMA node {} failed: {}", numa_node, std::strerror(errno));
}

// `bytes` of anonymous memory starting at a 2 MiB boundary, with transparent huge pages asked for
// (MADV_HUGEPAGE): faulting a ring in 4 KiB pages costs about 2.5 us a page on the GPU VMs, 15 ms
// for a 24 MiB ring, inside the program's first copy (lab/NOTES.md 87); in 2 MiB pages it is one
// fault per page. Best effort: where THP is off or no huge page is free, the kernel gives small
// pages and nothing else changes. The slack around the aligned stretch is unmapped again.
void* map_huge_aligned(std::size_t bytes) {
  const std::size_t span = bytes + kFreshBlock;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto first = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (first + kFreshBlock - 1) / kFreshBlock * kFreshBlock;
  if (aligned > first) munmap(raw, aligned - first);
  const std::uintptr_t end = first + span;
  if (end > aligned + bytes)
    munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);
  void* mem = reinterpret_cast<void*>(aligned);
  (void)madvise(mem, bytes, MADV_HUGEPAGE);
  return mem;
}

// Faults [mem, mem + bytes) in (`mem` 2 MiB aligned): its whole 2 MiB blocks on `queue`'s threads,
// one block each (MADV_POPULATE_WRITE: each thread takes its block's one huge-page fault, and no
// two race for the same page), the tail past them, or all where the kernel refused, with a memset
// here.
void fault_in(void* mem, std::size_t bytes, WorkQueue* queue) {
  const FreshBlocks blocks = queue && can_populate() ? whole_blocks(mem, bytes) : FreshBlocks{};
  if (blocks.count == 0) {
    std::memset(mem, 0, bytes);
    return;
  }
  PopulateFresh populate(blocks);
  queue->begin(&populate);
  queue->publish(blocks.count);
  queue->end();
  if (populate.refused()) {
    std::memset(mem, 0, bytes);
    return;
  }
  const std::size_t populated = blocks.count * kFreshBlock;  // from mem on: it is aligned
  std::memset(static_cast<char*>(mem) + populated, 0, bytes - populated);
}

}  // namespace

std::unique_ptr<StagingRing> StagingRing::create(const DriverApi& driver, unsigned slots,
                                                 std::size_t slot_bytes, int numa_node,
                                                 PinnedBudget::Hold hold, CUresult* error,
                                                 WorkQueue* fault_on) {
  *error = CUDA_SUCCESS;
  const std::int64_t t0 = steady_now_ns();
  std::unique_ptr<StagingRing> ring(new StagingRing(driver));
  ring->hold_ = std::move(hold);
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  ring->slot_bytes_ = (slot_bytes + page - 1) / page * page;
  ring->mapped_bytes_ = ring->slot_bytes_ * slots;
  void* mem = map_huge_aligned(ring->mapped_bytes_);
  if (!mem) {
    *error = CUDA_ERROR_OUT_OF_MEMORY;
    return nullptr;
  }
  ring->memory_ = mem;
  bind_to_node(mem, ring->mapped_bytes_, numa_node);
  // A forked child must not share (or lose) the parent's pinned pages.
  madvise(mem, ring->mapped_bytes_, MADV_DONTFORK);
  fault_in(mem, ring->mapped_bytes_, fault_on);  // on the chosen node
  const std::int64_t t1 = steady_now_ns();
  ring->build_times_.fault_ns = t1 - t0;

  RelaxedCaptureMode relaxed(driver);
  *error = driver.mem_host_register(mem, ring->mapped_bytes_, CU_MEMHOSTREGISTER_PORTABLE);
  if (*error != CUDA_SUCCESS) return nullptr;
  ring->registered_ = true;
  const std::int64_t t2 = steady_now_ns();
  ring->build_times_.register_ns = t2 - t1;
  for (unsigned i = 0; i < slots; ++i) {
    auto s = std::make_unique<StagingSlot>();
    s->data = static_cast<char*>(mem) + i * ring->slot_bytes_;
    *error = driver.event_create(&s->dma_done, CU_EVENT_DISABLE_TIMING);
    if (*error != CUDA_SUCCESS) return nullptr;
    ring->slots_.push_back(std::move(s));
  }
  ring->build_times_.events_ns = steady_now_ns() - t2;
  return ring;
}

StagingRing::~StagingRing() {
  RelaxedCaptureMode relaxed(driver_);
  for (auto& s : slots_) {
    // A DMA still in flight would read or write freed memory: wait for it unless the driver
    // cannot tell, in which case the memory is leaked rather than reused.
    while (s->dma_pending) {
      CUresult r = poll_idle(*s);
      if (r == CUDA_ERROR_NOT_READY) continue;
      if (r != CUDA_SUCCESS) {
        CMT_WARN_ONCE("a staging buffer's DMA state is unknown; its memory is leaked");
        hold_.keep();  // leaked memory stays pinned: its bytes stay counted
        return;
      }
    }
    if (s->dma_done) driver_.event_destroy(s->dma_done);
  }
  if (registered_) driver_.mem_host_unregister(memory_);
  if (memory_) munmap(memory_, mapped_bytes_);
}

void StagingRing::orphan() {
  for (auto& s : slots_) {
    s->dma_done = nullptr;  // no DMA of an ended context runs on
    s->dma_pending = false;
  }
}

CUresult StagingRing::poll_idle(StagingSlot& s) {
  if (!s.dma_pending) return CUDA_SUCCESS;
  CUresult r = driver_.event_query(s.dma_done);
  if (r == CUDA_SUCCESS) s.dma_pending = false;
  return r;
}

}  // namespace cmt
