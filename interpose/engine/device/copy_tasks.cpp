#include "engine/device/copy_tasks.h"

#include <algorithm>

#include "engine/shared/cpu_copy.h"

namespace cmt {
namespace {

void copy_by(CopyMethod method, char* dst, const char* src, std::size_t bytes) {
  switch (method) {
    case CopyMethod::Streaming:
      return copy_streaming(dst, src, bytes);
    default:
      return copy_memcpy(dst, src, bytes);
  }
}

// Copies unit `u` of a copy: the slice of its piece that one worker copies. The worker that
// finishes a piece's last unit stamps the slot with the piece's ticket, for the issuer.
template <typename CopyFn>
void copy_unit(const CopyLayout& l, StagingRing& ring, std::uint64_t base, std::size_t u,
               CopyFn&& copy_slice) {
  const std::size_t p = u / l.units_per_piece;
  const std::size_t unit = l.unit_length(p);
  const std::size_t begin = (u % l.units_per_piece) * unit;
  const std::size_t length = l.piece_length(p);
  StagingSlot& slot = ring.slot(base + p);
  if (begin < length)
    copy_slice(slot.data + begin, l.piece_offset(p) + begin, std::min(unit, length - begin));
  if (slot.units_done.fetch_add(1, std::memory_order_acq_rel) + 1 == l.units_per_piece) {
    slot.units_done.store(0, std::memory_order_relaxed);
    slot.ticket.store(base + p, std::memory_order_release);
  }
}

}  // namespace

void StageIn::run_unit(std::size_t u) {
  trace_.unit_started();
  copy_unit(layout_, ring_, base_, u, [this](char* staging, std::size_t off, std::size_t n) {
    copy_by(method_, staging, src_ + off, n);
  });
}

void DrainOut::run_unit(std::size_t u) {
  trace_.unit_started();
  copy_unit(layout_, ring_, base_, u, [this](char* staging, std::size_t off, std::size_t n) {
    copy_by(method_, dst_ + off, staging, n);
  });
}

}  // namespace cmt
