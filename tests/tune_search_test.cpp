// The searches of `cmt tune`, on synthetic landscapes instead of measurements: the full search
// climbs to the best configuration its candidates can reach, the grid visits every point, and a
// stop request (Ctrl-C) returns the best configuration seen so far.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "tune.h"

namespace cmt {
namespace {

// Peaks at 10 threads, 4 MiB chunks, a 32 MiB ring, streaming stores both ways; smooth, so each
// knob can be improved on its own.
double landscape(const Config& c) {
  double score = 50;
  score -= std::abs(static_cast<double>(c.threads) - 10) * 1.5;
  score -= std::abs(std::log2(static_cast<double>(c.chunk_bytes) / (4 << 20))) * 3;
  score -= std::abs(std::log2(static_cast<double>(c.chunk_bytes * c.slots) / (32 << 20))) * 2;
  score -= c.h2d_method == CopyMethod::Streaming ? 0 : 2;
  score -= c.d2h_method == CopyMethod::Streaming ? 0 : 1;
  return score;
}

TEST(TuneSearch, FullSearchClimbsToTheBestReachableConfiguration) {
  TuneResult start;
  start.config.threads = 2;
  start.config.chunk_bytes = 1 << 20;
  start.config.slots = 16;
  std::atomic<bool> stop{false};
  int calls = 0, last_done = -1;
  bool monotonic = true;
  TuneResult r = tune_full(
      [&](const Config& c) {
        ++calls;
        return landscape(c);
      },
      start, 15,
      [&](const TuneProgress& p) {
        monotonic = monotonic && p.done >= last_done && p.done <= p.total;
        last_done = p.done;
      },
      stop);
  EXPECT_FALSE(r.interrupted);
  EXPECT_EQ(r.config.threads, 10u);
  EXPECT_EQ(r.config.chunk_bytes, std::size_t{4} << 20);
  EXPECT_EQ(r.config.chunk_bytes * r.config.slots, std::size_t{32} << 20);
  EXPECT_EQ(r.config.h2d_method, CopyMethod::Streaming);
  EXPECT_EQ(r.config.d2h_method, CopyMethod::Streaming);
  EXPECT_DOUBLE_EQ(r.score_gbps, 50);
  EXPECT_EQ(r.evaluated, calls);
  EXPECT_TRUE(monotonic);
  EXPECT_FALSE(r.notes.empty());  // what moved, pass by pass
}

TEST(TuneSearch, AStopRequestKeepsTheBestSoFar) {
  TuneResult start;
  start.config.threads = 2;
  std::atomic<bool> stop{false};
  double best_seen = 0;
  int calls = 0;
  TuneResult r = tune_full(
      [&](const Config& c) {
        double s = landscape(c);
        best_seen = std::max(best_seen, s);
        if (++calls == 6) stop.store(true);  // as the SIGINT handler does
        return s;
      },
      start, 15, nullptr, stop);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(calls, 6);
  EXPECT_DOUBLE_EQ(r.score_gbps, best_seen);
  EXPECT_DOUBLE_EQ(landscape(r.config), best_seen);
}

TEST(TuneSearch, GridVisitsEveryPointAndKeepsTheBest) {
  std::atomic<bool> stop{false};
  int calls = 0;
  TuneResult r = tune_grid(
      [&](const Config& c) {
        ++calls;
        return landscape(c);
      },
      nullptr, stop);
  EXPECT_EQ(r.evaluated, calls);
  EXPECT_EQ(calls, 3 * 3 * 2 * 3);
  EXPECT_EQ(r.config.chunk_bytes, std::size_t{4} << 20);
  EXPECT_EQ(r.config.h2d_method, CopyMethod::Streaming);
}

}  // namespace
}  // namespace cmt
