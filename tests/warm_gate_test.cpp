// The warm gate on a clock of its own (warm_gate.h), and the interposer taking copies between the
// warm thresholds and the thresholds only while the fake engine's threads are awake.
#include "interposer/warm_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/shared/cpu_contention.h"
#include "fake_driver.h"
#include "interposer/interposer.h"

namespace cmt {
namespace {

constexpr std::int64_t kUs = 1000;  // ns

TEST(WarmGate, TakesWhileTheThreadsStillSpin) {
  WarmGate gate;
  gate.set_spin(std::chrono::microseconds(1000));  // awake for 900 us after a copy
  EXPECT_FALSE(gate.admit(0)) << "no copy yet: the threads sleep";
  gate.copied(10'000 * kUs);
  EXPECT_TRUE(gate.admit(10'500 * kUs));
  gate.copied(10'600 * kUs);
  EXPECT_TRUE(gate.admit(11'450 * kUs)) << "850 us after the last copy's end";
  gate.copied(12'000 * kUs);
  EXPECT_FALSE(gate.admit(12'950 * kUs)) << "950 us after: within the margin, taken as asleep";
  EXPECT_FALSE(gate.admit(20'000 * kUs)) << "long after: asleep";
  // A short spin keeps three quarters of it.
  gate.set_spin(std::chrono::microseconds(200));
  gate.copied(30'000 * kUs);
  EXPECT_TRUE(gate.admit(30'140 * kUs));
  EXPECT_FALSE(gate.admit(30'160 * kUs + 1'000 * kUs));
}

TEST(WarmGate, ADenseRunIsTakenColdAfterKDenseRunForwarded) {
  WarmGate gate;
  gate.set_spin(std::chrono::microseconds(1000));
  std::int64_t t = 50'000 * kUs;
  EXPECT_FALSE(gate.admit(t));  // the first of a run
  for (unsigned i = 0; i < WarmGate::kDenseRun - 1; ++i) EXPECT_FALSE(gate.admit(t += 500 * kUs));
  EXPECT_TRUE(gate.admit(t += 500 * kUs)) << "the run's next copy wakes the threads";
  // Offers 2 ms apart never make a run.
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(gate.admit(t += 2000 * kUs));
}

TEST(WarmGate, AnOfferThatIsNotTakenEndsTheRun) {
  WarmGate gate;
  gate.set_spin(std::chrono::microseconds(1000));
  std::int64_t t = 50'000 * kUs;
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(gate.admit(t += 100 * kUs)) << i;
    gate.not_taken();  // e.g. pinned memory
  }
}

TEST(WarmGate, ThreadsThatNapBetweenCopiesAreAwakeOnlyForTheirBridge) {
  WarmGate gate;
  gate.set_spin(std::chrono::microseconds(1000));
  gate.copied(10'000 * kUs, 100 * kUs);  // the copies have come far apart: a 100 us bridge
  EXPECT_TRUE(gate.admit(10'050 * kUs));
  EXPECT_FALSE(gate.admit(10'100 * kUs)) << "past three quarters of the bridge: napping";
  EXPECT_FALSE(gate.admit(10'500 * kUs));
  gate.copied(20'000 * kUs);  // and close together again
  EXPECT_TRUE(gate.admit(20'500 * kUs));
  gate.set_spin(std::chrono::microseconds(0));  // threads that never spin: the bridge is none
  gate.copied(30'000 * kUs, 100 * kUs);
  EXPECT_FALSE(gate.admit(30'010 * kUs));
}

TEST(WarmGate, ThreadsThatNeverSpinTakeNothing) {
  WarmGate gate;
  gate.set_spin(std::chrono::microseconds(0));
  gate.copied(0);
  std::int64_t t = 0;
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(gate.admit(t += 1));
}

// Against the fake driver, on the real clock: the engine's threads spin 200 ms here, so "soon"
// (150 ms) holds under sanitizers on a busy 2-core machine, and 400 ms is asleep. The machine's
// CPUs are never all taken here (no loadavg file): on a loaded test machine the threads would
// otherwise sleep at once, and every warm copy go to CUDA (CpuContention). The stand-in lives as
// long as the process: the engine's pools, which hold it, outlive the test.
class WarmCopies : public ::testing::Test {
 protected:
  ~WarmCopies() override { CpuContention::set_machine(nullptr); }
  WarmCopies() {
    static CpuContention never("");
    CpuContention::set_machine(&never);
    config.threads = 2;
    config.slots = 4;
    config.chunk_bytes = 256 << 10;
    config.d2h_chunk_bytes = 256 << 10;
    config.threshold = 2 << 20;
    config.warm_threshold = 256 << 10;
    config.d2h_threshold = 1 << 20;
    config.d2h_warm_threshold = 64 << 10;
    config.spin_us = 200'000;
  }
  std::size_t h2d(Interposer& i, void* d, const std::vector<char>& host, std::size_t bytes) {
    return i.take_copy(d, host.data(), bytes, kHostToDevice, CU_STREAM_LEGACY, true,
                      Entry::Runtime);
  }
  static void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
  fake::FakeDriver fake;
  Config config;
};

TEST_F(WarmCopies, TakenRightAfterACopyForwardedOnceAsleep) {
  Interposer interposer(&fake.api(), config);
  std::vector<char> host(4 << 20);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<char>(i * 7 + 3);
  auto* d = reinterpret_cast<void*>(fake.alloc_device(host.size()));
  const std::size_t warm = (300 << 10) + 3;  // odd, between warm_threshold and threshold
  ASSERT_EQ(h2d(interposer, d, host, host.size()), host.size());  // taken: the threads wake
  EXPECT_EQ(h2d(interposer, d, host, warm), warm) << "taken while the threads spin";
  std::vector<char> back(warm);
  EXPECT_EQ(interposer.take_copy(back.data(), d, warm, kDeviceToHost, CU_STREAM_LEGACY, true,
                                Entry::Runtime),
            warm);
  EXPECT_EQ(0, std::memcmp(back.data(), host.data(), warm));
  sleep_ms(400);
  const long queries = fake.pointer_queries.load();
  EXPECT_EQ(h2d(interposer, d, host, warm), 0u) << "forwarded: the threads sleep";
  EXPECT_EQ(fake.pointer_queries.load(), queries) << "the driver was not asked";
  EXPECT_NE(interposer.stats().to_json().find("\"threads_asleep\": 1"), std::string::npos)
      << interposer.stats().to_json();
  // Below the warm threshold, never taken, even warm.
  ASSERT_EQ(h2d(interposer, d, host, host.size()), host.size());
  EXPECT_EQ(h2d(interposer, d, host, 100 << 10), 0u);
}

TEST_F(WarmCopies, ARunOfSmallCopiesWakesTheThreads) {
  Interposer interposer(&fake.api(), config);
  std::vector<char> host(512 << 10, 'r');
  auto* d = reinterpret_cast<void*>(fake.alloc_device(host.size()));
  std::vector<std::size_t> done;
  for (unsigned i = 0; i < WarmGate::kDenseRun + 3; ++i) done.push_back(h2d(interposer, d, host, 400 << 10));
  for (unsigned i = 0; i < done.size(); ++i)
    EXPECT_EQ(done[i], i < WarmGate::kDenseRun ? 0u : std::size_t{400} << 10) << "copy " << i;
}

TEST_F(WarmCopies, PinnedCopiesMakeNoRun) {
  Interposer interposer(&fake.api(), config);
  auto* pinned = static_cast<char*>(fake.alloc_pinned(512 << 10));
  std::vector<char> host(512 << 10, 'p');
  auto* d = reinterpret_cast<void*>(fake.alloc_device(host.size()));
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(interposer.take_copy(d, pinned, 400 << 10, kHostToDevice, CU_STREAM_LEGACY, true,
                                  Entry::Runtime),
              0u);
  EXPECT_EQ(h2d(interposer, d, host, 400 << 10), 0u) << "a pageable copy after pinned ones";
}

// A warm copy gains too little to wait behind another thread's copy: with one lane, held by a
// large copy whose DMAs take up to 20 ms each on a slow fake driver, it is forwarded at once.
TEST_F(WarmCopies, AWarmCopyDoesNotWaitForABusyLane) {
  fake::FakeDriver slow(20'000);
  config.lanes = 1;
  Interposer interposer(&slow.api(), config);
  std::vector<char> host(8 << 20, 'b');
  auto* d = reinterpret_cast<void*>(slow.alloc_device(host.size()));
  ASSERT_EQ(h2d(interposer, d, host, 2 << 20), 2u << 20);  // the threads wake and spin
  std::atomic<bool> large_done{false};
  std::size_t large = 0;
  std::thread other([&] {
    large = h2d(interposer, d, host, host.size());  // 32 pieces: the lane is held a while
    large_done = true;
  });
  sleep_ms(20);
  EXPECT_EQ(h2d(interposer, d, host, (300 << 10) + 3), 0u) << "forwarded, not queued";
  EXPECT_FALSE(large_done.load()) << "it did not wait for the large copy";
  other.join();
  EXPECT_EQ(large, host.size());
  EXPECT_NE(interposer.stats().to_json().find("\"lanes_busy\": 1"), std::string::npos)
      << interposer.stats().to_json();
}

}  // namespace
}  // namespace cmt
