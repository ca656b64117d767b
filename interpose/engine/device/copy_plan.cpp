#include "engine/device/copy_plan.h"

#include <algorithm>

namespace cmt {
namespace {

// Pieces grow past chunk_bytes (up to a D2H slot) only in copies kPiecesPerLongCopy pieces long.
using rules::kPiecesPerCopy;
using rules::kPiecesPerLongCopy;

// Staging with non-temporal stores (below kStreamingStageBelow) measured 1.5x faster for 4 MiB
// host-to-device copies on the H200 machine, 1.14x at 64 MiB, and 10-15% slower at 1 GiB, where
// ordinary stores leave the staging buffers in the last-level cache for the DMA to read
// (bench/lab/NOTES.md 10, 12).
using rules::kStreamingStageBelow;
// Draining with ordinary stores (below kStreamingDrainFrom) measured faster than non-temporal
// ones for device-to-host copies of 512 KiB to 16 MiB on the H200 machine (3.34x CUDA's path
// against 2.64x at 1 MiB, 5.50x against 4.70x at 16 MiB: bench/lab/NOTES.md 33): a destination
// that fits in the cache is left there, where the program reads it next. Larger ones stream past
// the cache.
using rules::kStreamingDrainFrom;
constexpr std::size_t kMinPiece = 256 << 10;
constexpr std::size_t kMinUnit = 64 << 10;
// Ramp pieces: the first and last pieces of a copy halve down to this (and their units to 16 KiB).
constexpr std::size_t kRampFloor = 256 << 10;
constexpr std::size_t kMaxRamp = 4;
constexpr std::size_t kMinRampUnit = 16 << 10;

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

CopyMethod staging_method(CopyMethod configured, std::size_t bytes) {
  if (configured != CopyMethod::Auto) return configured;
  return bytes < kStreamingStageBelow ? CopyMethod::Streaming : CopyMethod::Memcpy;
}

CopyMethod drain_method(CopyMethod configured, std::size_t bytes) {
  if (configured != CopyMethod::Auto) return configured;
  return bytes < kStreamingDrainFrom ? CopyMethod::Memcpy : CopyMethod::Streaming;
}

CopyLayout plan_copy(std::size_t bytes, unsigned threads, std::size_t slot_bytes, bool ramp,
                     std::size_t medium_piece) {
  CopyLayout l;
  l.bytes = bytes;
  std::size_t largest = slot_bytes;
  if (medium_piece)
    largest =
        std::min(slot_bytes, std::max(medium_piece, round_up(bytes / kPiecesPerLongCopy, 4096)));
  l.piece = std::clamp(round_up(std::max<std::size_t>(bytes / kPiecesPerCopy, 1), 4096),
                       std::min(kMinPiece, largest), largest);
  // Each ramp step halves the first and last pieces while they stay whole pages of at least
  // kRampFloor and the copy keeps a steady piece between the two ramps.
  while (ramp && l.ramp < kMaxRamp) {
    const std::size_t next = l.ramp + 1, smallest = l.piece >> next;
    if (smallest < kRampFloor || l.piece % (std::size_t{4096} << next) != 0 ||
        bytes < 2 * (l.piece - smallest) + l.piece)
      break;
    l.ramp = next;
  }
  const std::size_t ends = 2 * (l.piece - (l.piece >> l.ramp));
  l.pieces = 2 * l.ramp + (bytes - ends + l.piece - 1) / l.piece;
  std::size_t share = (l.piece + std::max(1u, threads) - 1) / std::max(1u, threads);
  std::size_t unit = std::clamp(round_up(share, 4096), std::min(kMinUnit, l.piece), l.piece);
  l.units_per_piece = (l.piece + unit - 1) / unit;
  return l;
}

std::size_t CopyLayout::piece_offset(std::size_t i) const {
  const std::size_t first = piece >> ramp;  // the smallest piece, at each end
  if (i <= ramp) return first * ((std::size_t{1} << i) - 1);
  const std::size_t head = piece - first, steady_end = bytes - head;
  const std::size_t steady = (steady_end - head + piece - 1) / piece;
  if (i <= ramp + steady) return std::min(head + (i - ramp) * piece, steady_end);
  const std::size_t j = std::min(i - ramp - steady, ramp);  // ramp pieces down: piece/2, /4, ...
  return steady_end + piece - (piece >> j);
}

std::size_t CopyLayout::unit_length(std::size_t i) const {
  const std::size_t length = piece_length(i);
  return std::max(round_up((length + units_per_piece - 1) / units_per_piece, 4096), kMinRampUnit);
}

unsigned pool_threads(unsigned per_copy, std::size_t local_cpus) {
  const std::size_t room =
      local_cpus > rules::kPoolSpareCores ? local_cpus - rules::kPoolSpareCores : 1;
  return static_cast<unsigned>(
      std::max<std::size_t>(per_copy, std::min<std::size_t>(2 * per_copy, room)));
}

}  // namespace cmt
