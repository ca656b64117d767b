// Copy planning, pure: how a copy is cut into pieces and units, the ramp at both ends, when
// pieces may grow past the medium size, and the choices made from a copy's size alone.
#include <gtest/gtest.h>

#include <random>

#include "engine/device/copy_plan.h"
#include "engine/shared/gpu_locality.h"

namespace cmt {
namespace {

TEST(CopyLayout, PiecesForTheLinkUnitsForTheWorkers) {
  CopyLayout l = plan_copy(1, 8, 2 << 20);
  EXPECT_EQ(l.pieces, 1u);
  EXPECT_EQ(l.piece_length(0), 1u);
  l = plan_copy(16 << 20, 8, 2 << 20, false);
  EXPECT_EQ(l.piece, 2u << 20);
  EXPECT_EQ(l.pieces, 8u);
  EXPECT_EQ(l.unit_length(0), 256u << 10);
  EXPECT_EQ(l.units_per_piece, 8u);
  l = plan_copy(4 << 20, 8, 2 << 20, false);
  EXPECT_EQ(l.piece, 512u << 10);
  EXPECT_EQ(l.unit_length(0), 64u << 10);
  l = plan_copy((1ull << 30) + 5, 9, 2 << 20, false);
  EXPECT_EQ(l.piece, 2u << 20);
  EXPECT_EQ(l.pieces, 513u);
  EXPECT_EQ(l.piece_length(512), 5u);
  EXPECT_EQ(l.unit_length(0), 233472u);  // 2 MiB / 9, rounded up to 4 KiB
  EXPECT_EQ(l.units_per_piece, 9u);
  l = plan_copy(1ull << 30, 8, 4096);
  EXPECT_EQ(l.piece, 4096u);
  EXPECT_EQ(l.ramp, 0u);
  EXPECT_EQ(l.units_per_piece, 1u);
  EXPECT_EQ(auto_threads(16), 8u);
  EXPECT_EQ(auto_threads(2), 1u);
  EXPECT_EQ(auto_threads(64), 8u);
}

TEST(CopyLayout, RampsHalveDownTo256KiBAtBothEnds) {
  // 16 MiB through 2 MiB slots: 256K, 512K, 1M, six steady 2M pieces and a 512K one, 1M, 512K,
  // 256K.
  CopyLayout l = plan_copy(16 << 20, 8, 2 << 20);
  EXPECT_EQ(l.ramp, 3u);
  ASSERT_EQ(l.pieces, 13u);
  const std::size_t K = 1024;
  const std::size_t want[] = {256 * K,  512 * K,  1024 * K, 2048 * K, 2048 * K, 2048 * K, 2048 * K,
                              2048 * K, 2048 * K, 512 * K,  1024 * K, 512 * K,  256 * K};
  for (std::size_t i = 0; i < l.pieces; ++i) EXPECT_EQ(l.piece_length(i), want[i]) << i;
  EXPECT_EQ(l.unit_length(0), 32u * K);  // 256K over 8 workers
  // Too small for a steady piece between two ramps: shorter ramps, then none.
  EXPECT_EQ(plan_copy(4 << 20, 8, 2 << 20).ramp, 1u);  // 512K pieces: 256K at each end
  EXPECT_EQ(plan_copy(2 << 20, 8, 2 << 20).ramp, 0u);
  EXPECT_EQ(plan_copy(16 << 20, 8, 4 << 20).ramp, 3u);  // still 2M pieces: 8 per copy
  EXPECT_EQ(plan_copy(64 << 20, 8, 4 << 20).ramp, 4u);  // 4M down to 256K
}

TEST(CopyLayout, PiecesGrowPastTheMediumSizeOnlyInLongCopies) {
  const std::size_t M = 1 << 20;
  // 4 MiB slots, 2 MiB medium pieces: a copy needs 64 pieces' worth to use more.
  EXPECT_EQ(plan_copy(16 * M, 8, 4 * M, true, 2 * M).piece, 2 * M);
  EXPECT_EQ(plan_copy(64 * M, 8, 4 * M, true, 2 * M).piece, 2 * M);
  EXPECT_EQ(plan_copy(128 * M, 8, 4 * M, true, 2 * M).piece, 2 * M);
  EXPECT_EQ(plan_copy(192 * M, 8, 4 * M, true, 2 * M).piece, 3 * M);
  EXPECT_EQ(plan_copy(256 * M, 8, 4 * M, true, 2 * M).piece, 4 * M);
  EXPECT_EQ(plan_copy(std::size_t{1} << 30, 8, 4 * M, true, 2 * M).piece, 4 * M);  // the slot
  // No medium size, or one at least the slot: the slot bounds the pieces as before.
  EXPECT_EQ(plan_copy(64 * M, 8, 4 * M, true, 0).piece, 4 * M);
  EXPECT_EQ(plan_copy(64 * M, 8, 4 * M, true, 8 * M).piece, 4 * M);
  // Small copies keep their eighths.
  EXPECT_EQ(plan_copy(4 * M, 8, 4 * M, true, 2 * M).piece, 512u << 10);
}

// Whatever the sizes, the pieces tile the copy exactly, none is empty or larger than a slot, and
// the units of each piece cover it.
TEST(CopyLayout, PiecesTileTheCopyExactly) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::size_t bytes = 1 + rng() % (trial % 3 == 0 ? (1ull << 33) : (64ull << 20));
    const unsigned threads = 1 + rng() % 16;
    const std::size_t slot = std::size_t{4096} << (rng() % 11);
    const std::size_t medium = rng() % 2 ? 0 : std::size_t{4096} << (rng() % 11);
    for (bool ramp : {false, true}) {
      CopyLayout l = plan_copy(bytes, threads, slot, ramp, medium);
      SCOPED_TRACE(testing::Message() << "bytes=" << bytes << " threads=" << threads << " slot="
                                      << slot << " medium=" << medium << " ramp=" << ramp);
      ASSERT_EQ(l.piece_offset(0), 0u);
      ASSERT_EQ(l.piece_offset(l.pieces), bytes);
      // Every piece at both ends; of a long steady run between them, only its ends.
      const std::size_t edge = 2 * l.ramp + 2;
      for (std::size_t i = 0; i < l.pieces;
           i = i + 1 == edge && l.pieces > 2 * edge ? l.pieces - edge : i + 1) {
        const std::size_t n = l.piece_length(i);
        ASSERT_GT(n, 0u) << i;
        ASSERT_LE(n, slot) << i;
        ASSERT_GE(l.unit_length(i) * l.units_per_piece, n) << i;
      }
    }
  }
}

TEST(CopyMethodChoice, AutoStagingStreamsBelow256MiBAndDrainsStream) {
  EXPECT_EQ(staging_method(CopyMethod::Auto, 4u << 20), CopyMethod::Streaming);
  EXPECT_EQ(staging_method(CopyMethod::Auto, 64u << 20), CopyMethod::Streaming);
  EXPECT_EQ(staging_method(CopyMethod::Auto, 256u << 20), CopyMethod::Memcpy);
  EXPECT_EQ(staging_method(CopyMethod::Streaming, 1u << 30), CopyMethod::Streaming);
  EXPECT_EQ(staging_method(CopyMethod::Memcpy, 4u << 20), CopyMethod::Memcpy);
  EXPECT_EQ(drain_method(CopyMethod::Auto, 1u << 20), CopyMethod::Memcpy);
  EXPECT_EQ(drain_method(CopyMethod::Auto, (32u << 20) - 1), CopyMethod::Memcpy);
  EXPECT_EQ(drain_method(CopyMethod::Auto, 32u << 20), CopyMethod::Streaming);
  EXPECT_EQ(drain_method(CopyMethod::Memcpy, 1u << 30), CopyMethod::Memcpy);
  EXPECT_EQ(drain_method(CopyMethod::Streaming, 1u << 20), CopyMethod::Streaming);
}

TEST(CopyPlan, AutoThreadsLeaveHalfTheCoresAtMostEight) {
  EXPECT_EQ(auto_threads(1), 1u);
  EXPECT_EQ(auto_threads(16), 8u);
  EXPECT_EQ(auto_threads(6), 3u);
  EXPECT_EQ(auto_threads(64), 8u);
}

}  // namespace
}  // namespace cmt
