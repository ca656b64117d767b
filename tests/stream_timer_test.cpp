// StreamTimer (interpose/interposer/stream_timer.h) against the fake driver, whose streams run
// their work late: a copy is timed from its stream reaching it to its end, not to its call's
// return; nothing waits; a stream being captured and a full set of slots are not timed; with
// gaps, a timing says how long its stream ran other work since the copy timed on it before.
#include "interposer/stream_timer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "fake_driver.h"

namespace cmt {
namespace {

using Timed = StreamTimer::Timing;

std::vector<Timed> collect_until(StreamTimer& timer, std::size_t want) {
  std::vector<Timed> out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out.size() < want && std::chrono::steady_clock::now() < until) {
    timer.collect([&](const Timed& t) { out.push_back(t); });
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return out;
}

TEST(StreamTimer, ACopyIsTimedOnItsStreamToItsEndAndReadWithoutWaiting) {
  fake::FakeDriver driver(0);
  StreamTimer timer(driver.api());
  CUstream s = driver.create_stream();
  std::vector<char> host(1 << 20, 'x');
  CUdeviceptr dev = driver.alloc_device(host.size());
  const int slot = timer.begin(s);
  ASSERT_GE(slot, 0);
  // The stream reaches the copy: its start event recorded (a sleep was not enough on a loaded
  // machine: the event was then recorded after the pause below, and the copy timed short).
  ASSERT_EQ(driver.api().stream_synchronize(s), CUDA_SUCCESS);
  // The stream is held at the copy: its call returns at once, the copy runs 20 ms later.
  driver.pause_streams(true);
  const auto called = std::chrono::steady_clock::now();
  ASSERT_EQ(driver.api().memcpy_htod_async(dev, host.data(), host.size(), s), CUDA_SUCCESS);
  timer.end(slot, s, 7);
  EXPECT_LT(std::chrono::steady_clock::now() - called, std::chrono::milliseconds(10));
  EXPECT_TRUE(timer.waiting());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<Timed> none;
  timer.collect([&](const Timed&) { none.push_back({}); });
  EXPECT_TRUE(none.empty());  // not run yet: nothing read, nothing waited for
  driver.pause_streams(false);
  const std::vector<Timed> got = collect_until(timer, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].tag, 7u);
  EXPECT_GE(got[0].ns, 20000000u);  // to the copy's end, not to its call's return
  EXPECT_LT(got[0].ns, 5000000000u);
  EXPECT_EQ(got[0].gap_ns, -1);  // not asked for
  EXPECT_FALSE(timer.waiting());
  // The slot and its events are used again.
  const long made = driver.record_count.load();
  const int again = timer.begin(s);
  EXPECT_EQ(again, slot);
  timer.end(again, s, 10);
  EXPECT_EQ(driver.record_count.load(), made + 2);
  EXPECT_EQ(collect_until(timer, 1).size(), 1u);
  driver.synchronize_all();
}

TEST(StreamTimer, WhatItCannotTimeItLeavesUntimed) {
  fake::FakeDriver driver(0);
  StreamTimer timer(driver.api());
  CUstream s = driver.create_stream();
  // A stream being captured: a record would become a node of the program's graph.
  driver.faults.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  const long records = driver.record_count.load();
  EXPECT_EQ(timer.begin(s), -1);
  EXPECT_EQ(driver.record_count.load(), records);
  driver.faults.capture = CU_STREAM_CAPTURE_STATUS_NONE;
  // Every slot waiting on a held stream: the next copy is not timed, and nothing blocks.
  driver.pause_streams(true);
  for (int i = 0; i < StreamTimer::kSlots; ++i) {
    const int slot = timer.begin(s);
    ASSERT_GE(slot, 0) << i;
    timer.end(slot, s, 1);
  }
  EXPECT_EQ(timer.begin(s), -1);
  driver.pause_streams(false);
  EXPECT_EQ(collect_until(timer, StreamTimer::kSlots).size(),
            static_cast<std::size_t>(StreamTimer::kSlots));
  // A record the driver refuses frees its slot.
  driver.faults.record_fail_at = driver.record_count.load();
  EXPECT_EQ(timer.begin(s), -1);
  const int slot = timer.begin(s);
  EXPECT_GE(slot, 0);
  timer.end(slot, s, 1);
  EXPECT_EQ(collect_until(timer, 1).size(), 1u);
  driver.synchronize_all();
}

// With gaps: each timing also says how long its stream ran other work (here: was held) between
// the end of the copy timed before on it and its own start; the first on a stream, and one on
// another stream, say none. Slots whose end a later timing reads are kept until it is read, so a
// long run on few slots loses no gap.
TEST(StreamTimer, WithGapsATimingSaysHowLongItsStreamRanOtherWorkSinceTheCopyBefore) {
  fake::FakeDriver driver(0);
  StreamTimer timer(driver.api(), 4, true);
  CUstream s = driver.create_stream(), other = driver.create_stream();
  std::vector<char> host(1 << 16, 'x');
  // Each stream copies into its own device memory: the fake's streams write it from their threads.
  const CUdeviceptr dev = driver.alloc_device(host.size()),
                    other_dev = driver.alloc_device(host.size());
  auto timed_copy = [&](CUstream on, std::uint64_t tag) {
    const int slot = timer.begin(on);
    EXPECT_GE(slot, 0);
    EXPECT_EQ(
        driver.api().memcpy_htod_async(on == s ? dev : other_dev, host.data(), host.size(), on),
        CUDA_SUCCESS);
    timer.end(slot, on, tag);
  };
  timed_copy(s, 1);
  ASSERT_EQ(collect_until(timer, 1).size(), 1u);
  // The stream is busy for 15 ms before the next copy starts on it (the program's kernel).
  driver.pause_streams(true);
  timed_copy(s, 2);
  timed_copy(other, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(15));
  driver.pause_streams(false);
  std::vector<Timed> got = collect_until(timer, 2);
  ASSERT_EQ(got.size(), 2u);
  for (const Timed& t : got) {
    if (t.tag == 2) {
      EXPECT_GE(t.gap_ns, 15000000) << "the gap before copy 2";
    } else {
      EXPECT_EQ(t.gap_ns, -1) << "the first copy on its stream";
    }
  }
  // Many more copies than slots, one after another on one stream: each knows its gap.
  int known = 0, read = 0;
  for (int i = 0; i < 40; ++i) {
    timed_copy(s, 100 + i);
    for (const Timed& t : collect_until(timer, 1)) {
      ++read;
      known += t.gap_ns >= 0;
    }
  }
  EXPECT_EQ(read, 40);
  EXPECT_EQ(known, 40);
  driver.synchronize_all();
}

}  // namespace
}  // namespace cmt
