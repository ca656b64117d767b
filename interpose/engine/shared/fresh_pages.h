// Fresh destinations. A device-to-host copy into memory the process has never touched (the new
// tensor that `tensor.cpu()` returns) spends most of its time in page faults: one per 4 KiB page,
// each zeroing its page, taken by whichever drain thread writes there first. The engine spots
// such a destination (no sampled page resident) and prepares it before draining into it: it asks
// the kernel for transparent huge pages there (one fault per 2 MiB instead of 512) and populates
// the whole 2 MiB blocks in parallel, each block by one thread (MADV_POPULATE_WRITE), so that the
// drain writes pages that exist. Neither step changes a byte the application can see: fresh pages
// read as zero until the copy writes every byte of them.
#pragma once

#include <atomic>
#include <cstddef>

#include "common/copy_types.h"
#include "common/engine_rules.h"
#include "engine/shared/worker_pool.h"

namespace cmt {

// Blocks of an x86-64 transparent huge page. Destinations from kFreshPagesFrom on are checked
// for fresh (never written) pages: smaller ones hold at most one whole huge page, and glibc's heap
// serves many of them, where splitting its mapping for one block would gain little.
using rules::kFreshBlock;
using rules::kFreshPagesFrom;

// The whole 2 MiB-aligned blocks inside [p, p + n), the part of a destination that is prepared.
struct FreshBlocks {
  char* first = nullptr;
  std::size_t count = 0;
};
FreshBlocks whole_blocks(void* p, std::size_t n);

// True when none of a few sampled pages of the blocks (the first, one in the middle and the last)
// is resident: they look never written. The pages at the ends of the destination outside the
// blocks are not asked: malloc keeps its chunk header in the first one.
bool looks_fresh(const FreshBlocks& blocks);

// Whether this kernel can populate pages on request (MADV_POPULATE_WRITE, Linux 5.14), probed
// once per process on a page of its own. Without it, fresh destinations are left alone: huge-page
// advice alone would have the drain threads race to fault (and each zero) the same huge page.
bool can_populate();

// The whole blocks of a destination of `n` bytes at `p` to prepare before writing it: all of them
// if `mode` is not Off, the destination is at least kFreshPagesFrom long, the kernel can populate
// and it looks fresh; else none. It only looks (mincore): the caller prepares.
FreshBlocks find_fresh(FreshPages mode, void* p, std::size_t n);

// Asks for transparent huge pages over the blocks (MADV_HUGEPAGE). Best effort: a kernel or a
// mapping that says no leaves the blocks as they were.
void advise_huge_pages(const FreshBlocks& blocks);

// Faults [p, p + n) in, writable, without writing it (MADV_POPULATE_WRITE). False when the
// kernel or the mapping refuses.
bool populate_range(void* p, std::size_t n);

// Faults block `i` in, writable, without writing it. False when the kernel or the mapping
// refuses; the drain then faults the pages in as it writes them.
bool populate_block(const FreshBlocks& blocks, std::size_t i);

// The copy threads' job of faulting a fresh destination in, one block per unit (engine/shared/worker_pool.h),
// before a copier writes it.
class PopulateFresh final : public UnitTask {
 public:
  explicit PopulateFresh(const FreshBlocks& blocks) : blocks_(blocks) {}
  void run_unit(std::size_t i) override;
  bool refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  FreshBlocks blocks_;
  std::atomic<bool> refused_{false};
};

}  // namespace cmt
