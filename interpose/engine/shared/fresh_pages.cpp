#include "engine/shared/fresh_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "engine/shared/worker_pool.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace cmt {
namespace {

bool page_resident(const char* p) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char in_core = 0;
  void* start = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1));
  // An error (ENOMEM: not mapped) counts as resident: such a destination is left alone.
  if (mincore(start, 1, &in_core) != 0) return true;
  return (in_core & 1) != 0;
}

}  // namespace

FreshBlocks whole_blocks(void* p, std::size_t n) {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t first = (begin + kFreshBlock - 1) & ~(kFreshBlock - 1);
  const std::uintptr_t end = (begin + n) & ~(kFreshBlock - 1);
  if (n == 0 || begin + n < begin || end <= first) return {};
  return {reinterpret_cast<char*>(first), (end - first) / kFreshBlock};
}

bool looks_fresh(const FreshBlocks& blocks) {
  if (blocks.count == 0) return false;
  const char* end = blocks.first + blocks.count * kFreshBlock;
  return !page_resident(blocks.first) &&
         !page_resident(blocks.first + blocks.count / 2 * kFreshBlock) && !page_resident(end - 1);
}

FreshBlocks find_fresh(FreshPages mode, void* p, std::size_t n) {
  if (mode == FreshPages::Off || n < kFreshPagesFrom || !can_populate()) return {};
  const FreshBlocks blocks = whole_blocks(p, n);
  return looks_fresh(blocks) ? blocks : FreshBlocks{};
}

bool can_populate() {
  static const bool supported = [] {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    const bool ok = madvise(p, page, MADV_POPULATE_WRITE) == 0;
    munmap(p, page);
    return ok;
  }();
  return supported;
}

void advise_huge_pages(const FreshBlocks& blocks) {
  if (blocks.count) (void)madvise(blocks.first, blocks.count * kFreshBlock, MADV_HUGEPAGE);
}

bool populate_range(void* p, std::size_t n) {
  return madvise(p, n, MADV_POPULATE_WRITE) == 0;
}

bool populate_block(const FreshBlocks& blocks, std::size_t i) {
  return i < blocks.count && populate_range(blocks.first + i * kFreshBlock, kFreshBlock);
}

void PopulateFresh::run_unit(std::size_t i) {
  // One refusal (an old kernel) means all would be refused: stop asking.
  if (!refused_.load(std::memory_order_relaxed) && !populate_block(blocks_, i))
    refused_.store(true, std::memory_order_relaxed);
}

}  // namespace cmt
