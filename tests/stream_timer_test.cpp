// StreamTimer (interpose/interposer/stream_timer.h) against the fake driver, whose streams run
// their work late: a copy is timed from its stream reaching it to its end, not to its call's
// return; nothing waits; a stream being captured and a full set of slots are not timed.
#include "interposer/stream_timer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "fake_driver.h"

namespace cmt {
namespace {

struct Timed {
  bool to_device;
  std::size_t bytes;
  std::uint64_t ns;
};

std::vector<Timed> collect_until(StreamTimer& timer, std::size_t want) {
  std::vector<Timed> out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out.size() < want && std::chrono::steady_clock::now() < until) {
    timer.collect([&](bool to_device, std::size_t bytes, std::uint64_t ns) {
      out.push_back({to_device, bytes, ns});
    });
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
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the stream reaches the copy
  // The stream is held at the copy: its call returns at once, the copy runs 20 ms later.
  driver.pause_streams(true);
  const auto called = std::chrono::steady_clock::now();
  ASSERT_EQ(driver.api().memcpy_htod_async(dev, host.data(), host.size(), s), CUDA_SUCCESS);
  timer.end(slot, s, true, host.size());
  EXPECT_LT(std::chrono::steady_clock::now() - called, std::chrono::milliseconds(10));
  EXPECT_TRUE(timer.waiting());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<Timed> none;
  timer.collect([&](bool, std::size_t, std::uint64_t) { none.push_back({}); });
  EXPECT_TRUE(none.empty());  // not run yet: nothing read, nothing waited for
  driver.pause_streams(false);
  const std::vector<Timed> got = collect_until(timer, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].to_device);
  EXPECT_EQ(got[0].bytes, host.size());
  EXPECT_GE(got[0].ns, 20000000u);  // to the copy's end, not to its call's return
  EXPECT_LT(got[0].ns, 5000000000u);
  EXPECT_FALSE(timer.waiting());
  // The slot and its events are used again.
  const long made = driver.record_count.load();
  const int again = timer.begin(s);
  EXPECT_EQ(again, slot);
  timer.end(again, s, false, 10);
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
    timer.end(slot, s, true, 1);
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
  timer.end(slot, s, true, 1);
  EXPECT_EQ(collect_until(timer, 1).size(), 1u);
  driver.synchronize_all();
}

}  // namespace
}  // namespace cmt
