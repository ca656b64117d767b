// The engine against the fake driver: byte-exact copies over sizes, offsets, directions, streams
// and threads, and injected driver failures that must end in the right outcome, never a hang.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/log.h"
#include "engine/device/copy_engine.h"
#include "engine/device/pipeline.h"
#include "engine/shared/cpu_copy.h"
#include "engine/shared/fresh_pages.h"
#include "engine/shared/gpu_locality.h"
#include "engine/shared/pinned_budget.h"
#include "engine/shared/staging_ring.h"
#include "engine/shared/worker_pool.h"
#include "fake_driver.h"

namespace cmt {
namespace {

std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

Config small_config(unsigned threads, std::size_t chunk = 64 << 10, unsigned slots = 4) {
  Config c;
  c.threads = threads;
  c.chunk_bytes = chunk;
  c.d2h_chunk_bytes = chunk;  // both directions' rings alike, unless a test says otherwise
  c.slots = slots;
  c.threshold = 0;
  // The tests' copies are small: each may open a lane, unless a test says otherwise.
  c.lane_split_from = 0;
  return c;
}

// Copies host -> device -> host through the engine and checks every byte, including the
// guard bytes around the destination.
void round_trip(fake::FakeDriver& fake, CopyEngine& engine, std::size_t bytes, std::size_t host_off,
                std::size_t dev_off, CUstream stream, bool synchronous, unsigned seed) {
  SCOPED_TRACE(testing::Message() << "bytes=" << bytes << " host_off=" << host_off
                                  << " dev_off=" << dev_off << " sync=" << synchronous);
  auto src = pattern(bytes + host_off, seed);
  CUdeviceptr dev = fake.alloc_device(bytes + dev_off + 16);
  std::memset(reinterpret_cast<void*>(dev), 0xAB, bytes + dev_off + 16);

  CopyRequest up{
      Direction::HostToDevice, src.data() + host_off, dev + dev_off, bytes, stream, synchronous};
  CopyOutcome out = engine.copy(up);
  ASSERT_EQ(out.status, CUDA_SUCCESS);
  ASSERT_EQ(out.bytes_done, bytes);
  // H2D returns once the source is staged: overwriting it now must not change the result.
  std::memset(src.data() + host_off, 0x5A, bytes);
  auto expect = pattern(bytes + host_off, seed);

  std::vector<unsigned char> back(bytes + host_off + 32, 0xCD);
  CopyRequest down{
      Direction::DeviceToHost, back.data() + host_off, dev + dev_off, bytes, stream, synchronous};
  out = engine.copy(down);
  ASSERT_EQ(out.status, CUDA_SUCCESS);
  ASSERT_EQ(out.bytes_done, bytes);
  // D2H returns only when every byte is in the user's buffer: check before any synchronization.
  ASSERT_EQ(0, std::memcmp(back.data() + host_off, expect.data() + host_off, bytes));
  for (std::size_t i = 0; i < host_off; ++i) ASSERT_EQ(back[i], 0xCD);
  for (std::size_t i = host_off + bytes; i < back.size(); ++i) ASSERT_EQ(back[i], 0xCD);
  fake.synchronize_all();
  auto* d = reinterpret_cast<unsigned char*>(dev);
  for (std::size_t i = 0; i < dev_off; ++i) ASSERT_EQ(d[i], 0xAB);
  for (std::size_t i = dev_off + bytes; i < dev_off + bytes + 16; ++i) ASSERT_EQ(d[i], 0xAB);
}

TEST(CopyEngine, ByteExactAcrossSizesAndOffsets) {
  fake::FakeDriver fake(20);
  CopyEngine engine(fake.api(), small_config(3));
  CUstream stream = fake.create_stream();
  const std::size_t sizes[] = {1, 3, 4095, 4096, 65535, 65537, (1 << 20) + 7, (5 << 20) - 3};
  const std::size_t offsets[] = {0, 1, 7, 63};
  unsigned seed = 1;
  for (std::size_t bytes : sizes)
    for (std::size_t off : offsets) {
      round_trip(fake, engine, bytes, off, (off * 5) % 64, stream, seed % 2 == 0, seed);
      ++seed;
    }
}

TEST(CopyEngine, RampedCopiesAreByteExact) {
  fake::FakeDriver fake(10);
  CopyEngine engine(fake.api(), small_config(3, 2 << 20, 4));
  unsigned seed = 100;
  for (std::size_t bytes : {(16u << 20) + 3, (5u << 20) - 1, (4u << 20) + 4097, 6u << 20}) {
    round_trip(fake, engine, bytes, 5, 3, CU_STREAM_LEGACY, seed % 2 == 0, seed);
    ++seed;
  }
}

// Another thread capturing a graph in global mode must not have its capture invalidated by a
// copy cmt makes on this thread (found on the H200: CUDA alone left such a capture intact, cmt's
// first copy did not). Every driver call of the copy, building the ring included, runs with this
// thread's capture mode relaxed, and the thread's own mode is restored after.
TEST(CopyEngine, CopiesDuringAnotherThreadsGlobalCaptureAreRelaxed) {
  fake::FakeDriver fake(5);
  fake.faults.global_capture_elsewhere = true;
  CopyEngine engine(fake.api(), small_config(2));
  round_trip(fake, engine, (1 << 20) + 77, 5, 3, CU_STREAM_LEGACY, true, 31);
  round_trip(fake, engine, (2 << 20) + 1, 0, 1, CU_STREAM_LEGACY, false, 32);
  EXPECT_EQ(fake.unsafe_calls.load(), 0);
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  ASSERT_EQ(fake.api().thread_exchange_capture_mode(&mode), CUDA_SUCCESS);
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
  fake.api().thread_exchange_capture_mode(&mode);
}

TEST(CopyEngine, LargeCopyThroughSmallRing) {
  fake::FakeDriver fake(5);
  CopyEngine engine(fake.api(), small_config(4, 256 << 10, 3));
  round_trip(fake, engine, (256u << 20) + 5, 3, 1, CU_STREAM_LEGACY, true, 42);
}

TEST(CopyEngine, DefaultStreamsAreHonoured) {
  fake::FakeDriver fake(10);
  CopyEngine engine(fake.api(), small_config(2));
  round_trip(fake, engine, 3 << 20, 0, 0, CU_STREAM_LEGACY, true, 3);
  round_trip(fake, engine, 3 << 20, 1, 1, CU_STREAM_PER_THREAD, false, 4);
}

// Ten threads on four streams at once, byte-exact, with one lane per direction (they take turns)
// and with three (concurrent copies get lanes of their own, up to three).
TEST(CopyEngine, ManyThreadsManyStreams) {
  for (unsigned lanes : {1u, 3u}) {
    SCOPED_TRACE(testing::Message() << "lanes=" << lanes);
    fake::FakeDriver fake(10);
    Config config = small_config(2, 128 << 10, 4);
    config.lanes = lanes;
    CopyEngine engine(fake.api(), config);
    std::vector<CUstream> streams;
    for (int i = 0; i < 4; ++i) streams.push_back(fake.create_stream());
    std::vector<std::thread> threads;
    std::atomic<int> failures{0}, finished{0};
    for (int t = 0; t < 10; ++t) {
      threads.emplace_back([&, t] {
        for (int rep = 0; rep < 3; ++rep) {
          std::size_t bytes = (1u << 20) + static_cast<std::size_t>(t) * 4099 + rep;
          CUstream s = t % 5 == 4 ? CU_STREAM_PER_THREAD : streams[t % 4];
          auto src = pattern(bytes, t * 10 + rep);
          CUdeviceptr dev = fake.alloc_device(bytes);
          CopyOutcome a = engine.copy({Direction::HostToDevice, src.data(), dev, bytes, s, false});
          std::vector<unsigned char> back(bytes);
          std::size_t done = a.bytes_done;
          if (done == bytes) {
            CopyOutcome b =
                engine.copy({Direction::DeviceToHost, back.data(), dev, bytes, s, false});
            done = b.bytes_done;
          }
          // The engine may decline (no lane came free); then nothing may have been touched.
          if (done == bytes && std::memcmp(back.data(), src.data(), bytes) != 0) ++failures;
          if (done == bytes) ++finished;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_GT(finished.load(), 0);
    auto built = engine.lanes();
    for (Direction d : {Direction::HostToDevice, Direction::DeviceToHost}) {
      std::size_t n = std::count_if(built.begin(), built.end(),
                                    [d](const LaneInfo& l) { return l.direction == d; });
      EXPECT_GE(n, 1u);
      EXPECT_LE(n, lanes);
    }
    if (lanes > 1) {
      EXPECT_GT(built.size(), 2u) << "concurrent copies should have had lanes of their own";
    }
  }
}

int process_threads() {
  int n = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f))
      if (std::sscanf(line, "Threads: %d", &n) == 1) break;
    std::fclose(f);
  }
  return n;
}

// Six callers at once, both directions, with lanes left to the engine (the default): more than one
// lane each way, never more than the engine's automatic number, and all lanes draw on one pool of
// threads for the GPU, so the process gains that pool's threads, not a set per lane.
TEST(CopyEngine, ConcurrentCopiesEachGetALaneAndShareTheGpusThreads) {
  fake::FakeDriver fake(10);
  Config config = small_config(3, 128 << 10, 4);
  ASSERT_EQ(config.lanes, 0u);
  CopyEngine engine(fake.api(), config);
  std::vector<CUstream> streams;  // each runs a thread of the fake's: made before counting
  for (int t = 0; t < 6; ++t) streams.push_back(fake.create_stream());
  const int before = process_threads();
  std::atomic<int> wrong{0}, forwarded{0}, ready{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 6; ++t)
    callers.emplace_back([&, t] {
      const std::size_t bytes = (6u << 20) + 4099 * t;
      auto src = pattern(bytes, 100 + t);
      std::vector<unsigned char> back(bytes);
      CUdeviceptr dev = fake.alloc_device(bytes);
      CUstream s = streams[t];
      ++ready;
      while (ready.load() < 6) std::this_thread::yield();
      for (int rep = 0; rep < 4; ++rep) {
        if (engine.copy({Direction::HostToDevice, src.data(), dev, bytes, s, false}).bytes_done !=
                bytes ||
            engine.copy({Direction::DeviceToHost, back.data(), dev, bytes, s, false}).bytes_done !=
                bytes)
          ++forwarded;
        else if (std::memcmp(back.data(), src.data(), bytes) != 0)
          ++wrong;
      }
    });
  const int during = process_threads();
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LT(forwarded.load(), 6 * 4) << "every copy was left to CUDA";
  auto lanes = engine.lanes();
  ASSERT_FALSE(lanes.empty());
  const unsigned pool = lanes[0].pool_threads;
  for (const LaneInfo& l : lanes) {
    EXPECT_EQ(l.pool_threads, pool) << "every lane of the GPU is on one pool";
    EXPECT_EQ(l.threads, 3u);
  }
  EXPECT_GT(lanes.size(), 2u) << "concurrent callers should have had lanes of their own";
  EXPECT_LE(lanes.size(), 2 * rules::kAutoLanes);
  EXPECT_LE(process_threads() - before, static_cast<int>(pool))
      << "threads started beyond the one pool (" << during - before << " while copying)";
}

// Copies on the legacy stream may have more lanes than those on streams of their own: CUDA runs
// them one after another there, and more lanes let more stage meanwhile (kAutoLanesLegacy).
TEST(CopyEngine, LegacyStreamCopiesMayHaveMoreLanes) {
  for (const bool legacy : {false, true}) {
    fake::FakeDriver fake(10);
    CopyEngine engine(fake.api(), small_config(2));
    constexpr int kCallers = 8;
    std::vector<CUstream> streams;
    for (int t = 0; t < kCallers; ++t)
      streams.push_back(legacy ? CU_STREAM_LEGACY : fake.create_stream());
    std::atomic<int> wrong{0}, ready{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < kCallers; ++t)
      callers.emplace_back([&, t] {
        const std::size_t bytes = (4u << 20) + 513 * t;
        auto src = pattern(bytes, 7 + t);
        std::vector<unsigned char> back(bytes);
        CUdeviceptr dev = fake.alloc_device(bytes);
        ++ready;
        while (ready.load() < kCallers) std::this_thread::yield();
        // What the engine declines (a caller that waited past rules::kLaneWait for a lane: likely
        // under ThreadSanitizer), CUDA copies, as the hooks forward it.
        const std::size_t done =
            engine.copy({Direction::HostToDevice, src.data(), dev, bytes, streams[t], false})
                .bytes_done;
        if (done < bytes)
          fake.run_copy(streams[t], reinterpret_cast<void*>(dev + done), src.data() + done,
                        bytes - done, false);
        // Read back by the fake's own copy, not the engine's.
        fake.run_copy(streams[t], back.data(), reinterpret_cast<const void*>(dev), bytes, true);
        if (std::memcmp(back.data(), src.data(), bytes) != 0) ++wrong;
      });
    for (auto& t : callers) t.join();
    EXPECT_EQ(wrong.load(), 0) << (legacy ? "legacy" : "own streams");
    const std::size_t lanes = engine.lanes().size();  // one direction: host to device
    // Eight callers released together overlap: each kind of stream fills its lanes.
    if (legacy) {
      EXPECT_LE(lanes, rules::kAutoLanesLegacy);
      EXPECT_GT(lanes, rules::kAutoLanes) << "legacy-stream copies stayed on the others' lanes";
    } else {
      EXPECT_LE(lanes, rules::kAutoLanes);
    }
  }
}

// Copies below lane_split_from take turns on the first lane, however many threads make them;
// larger ones may open lanes of their own, and while a large one holds the first lane, small ones
// wait for it rather than take the second. Checked with the fake's streams held, so that every
// caller asks while the others still hold their lanes.
TEST(CopyEngine, CopiesBelowTheSplitTakeTurnsOnTheFirstLane) {
  constexpr std::size_t kSmall = 512u << 10, kLarge = 2u << 20;
  for (const std::size_t bytes : {kSmall, kLarge}) {
    SCOPED_TRACE(testing::Message() << "bytes=" << bytes);
    fake::FakeDriver fake(10);
    Config config = small_config(2, 64 << 10, 2);
    config.lane_split_from = 1u << 20;
    CopyEngine engine(fake.api(), config);
    constexpr int kCallers = 4;
    std::vector<CUstream> streams;
    for (int t = 0; t < kCallers; ++t) streams.push_back(fake.create_stream());
    fake.pause_streams(true);  // every caller's DMAs wait: it keeps its lane until released
    std::atomic<int> wrong{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < kCallers; ++t)
      callers.emplace_back([&, t] {
        auto src = pattern(bytes + 4099 * t, 30 + t);
        CUdeviceptr dev = fake.alloc_device(src.size());
        const std::size_t done =
            engine.copy({Direction::HostToDevice, src.data(), dev, src.size(), streams[t], false})
                .bytes_done;
        if (done < src.size())
          fake.run_copy(streams[t], reinterpret_cast<void*>(dev + done), src.data() + done,
                        src.size() - done, false);
        std::vector<unsigned char> back(src.size());
        fake.run_copy(streams[t], back.data(), reinterpret_cast<const void*>(dev), src.size(),
                      true);
        if (back != src) ++wrong;
      });
    // Small copies: one holds the lane and the others queue for it; large: two hold lanes.
    const std::size_t queued = bytes == kSmall ? kCallers - 1 : kCallers - rules::kAutoLanes;
    for (int i = 0; i < 2000 && engine.waiting_copies() < queued; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(engine.waiting_copies(), queued);
    fake.pause_streams(false);
    for (auto& t : callers) t.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(engine.lanes().size(), bytes == kSmall ? 1u : std::size_t{rules::kAutoLanes});
  }
}

// Copies waiting for a lane get it in the order they asked: with one lane, a copy holds it (its
// DMAs held back) while four callers ask one after another, and they finish in that order. (A
// waiter that raced for the lane instead could lose it again and again: 30 ms on the H200,
// NOTES 46.)
TEST(CopyEngine, WaitingCopiesGetTheLaneInTheOrderTheyAsked) {
  fake::FakeDriver fake(10);
  Config config = small_config(2, 64 << 10, 2);
  config.lanes = 1;
  CopyEngine engine(fake.api(), config);
  CUstream stream = fake.create_stream();
  constexpr int kWaiters = 4;
  const std::size_t long_bytes = 1u << 20, bytes = 256u << 10;
  auto long_src = pattern(long_bytes, 1);
  CUdeviceptr long_dev = fake.alloc_device(long_bytes);
  fake.pause_streams(true);  // the first copy fills its two slots, then holds the lane
  std::thread holder([&] {
    EXPECT_EQ(engine.copy({Direction::HostToDevice, long_src.data(), long_dev, long_bytes, stream,
                           false})
                  .bytes_done,
              long_bytes);
  });
  while (fake.dma_count.load() == 0) std::this_thread::yield();  // it has the lane
  std::vector<std::vector<unsigned char>> src;
  std::vector<CUdeviceptr> dev;
  for (int i = 0; i < kWaiters; ++i) {
    src.push_back(pattern(bytes, 10 + i));
    dev.push_back(fake.alloc_device(bytes));
  }
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      const CopyOutcome out =
          engine.copy({Direction::HostToDevice, src[i].data(), dev[i], bytes, stream, false});
      EXPECT_EQ(out.bytes_done, bytes) << "waiter " << i << " was not given the lane in time";
      EXPECT_GT(out.lane_wait_ns, 0);
    });
    // The next one asks once this one waits.
    while (engine.waiting_copies() < static_cast<std::size_t>(i + 1))
      std::this_thread::yield();
  }
  fake.pause_streams(false);
  for (auto& t : waiters) t.join();
  holder.join();
  // Which copy each DMA belongs to, in enqueue order. A copy enqueues only while it holds the
  // lane, so with one lane the holder's DMAs come first, then waiter 0's, 1's, ... each in one
  // run. (When each caller returns says nothing: a waiter may be descheduled after letting go.)
  std::vector<int> owners;
  {
    std::lock_guard<std::mutex> lk(fake.mu);
    for (void* d : fake.dma_destinations) {
      const auto a = reinterpret_cast<CUdeviceptr>(d);
      int owner = -1;
      for (int i = 0; i < kWaiters; ++i)
        if (a >= dev[i] && a < dev[i] + bytes) owner = i;
      if (owners.empty() || owners.back() != owner) owners.push_back(owner);
    }
  }
  EXPECT_EQ(owners, (std::vector<int>{-1, 0, 1, 2, 3}));
  fake.synchronize_all();
  for (int i = 0; i < kWaiters; ++i)
    EXPECT_EQ(0, std::memcmp(reinterpret_cast<void*>(dev[i]), src[i].data(), bytes));
  EXPECT_EQ(0, std::memcmp(reinterpret_cast<void*>(long_dev), long_src.data(), long_bytes));
  EXPECT_EQ(engine.lanes().size(), 1u);
  EXPECT_EQ(engine.waiting_copies(), 0u);
}

// A copy that takes the lane after another starts in the slot after that copy's last piece, so
// it stages while the other's DMAs are still in the ring. Here the first copy's four pieces hold
// four of eight slots (their DMAs held back), and the second, on another stream, must go through
// the other four: a second copy starting at slot 0, as before, waited on the first one's DMA until
// the engine gave up (kForeignStallLimit) and took none of its bytes. With the built-in ring of 12
// slots, a copy that followed one of 16 or 22 MiB (13 and 16 pieces) waited so for one of that
// copy's last DMAs before staging its first piece (NOTES 68).
TEST(CopyEngine, ACopyFollowingAnotherUsesTheSlotsItLeftFree) {
  fake::FakeDriver fake(10);
  Config config = small_config(2, 64 << 10, 8);
  config.lanes = 1;
  CopyEngine engine(fake.api(), config);
  const CUstream first_stream = fake.create_stream(), second_stream = fake.create_stream();
  const std::size_t bytes = 4 * (64u << 10);  // four pieces of a slot each
  auto first = pattern(bytes, 61), second = pattern(bytes, 62);
  const CUdeviceptr first_dev = fake.alloc_device(bytes), second_dev = fake.alloc_device(bytes);
  fake.pause_streams(true);
  ASSERT_EQ(
      engine.copy({Direction::HostToDevice, first.data(), first_dev, bytes, first_stream, false})
          .bytes_done,
      bytes);
  const auto start = std::chrono::steady_clock::now();
  const CopyOutcome out = engine.copy(
      {Direction::HostToDevice, second.data(), second_dev, bytes, second_stream, false});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(out.status, CUDA_SUCCESS);
  EXPECT_EQ(out.bytes_done, bytes) << "the second copy waited for the first one's slots";
  EXPECT_LT(took, kForeignStallLimit);
  const auto want_first = first, want_second = second;
  std::memset(first.data(), 0, bytes);  // both are staged: the sources may change now
  std::memset(second.data(), 0, bytes);
  fake.pause_streams(false);
  fake.synchronize_all();
  EXPECT_EQ(0, std::memcmp(reinterpret_cast<void*>(first_dev), want_first.data(), bytes));
  EXPECT_EQ(0, std::memcmp(reinterpret_cast<void*>(second_dev), want_second.data(), bytes));
  EXPECT_EQ(engine.lanes().size(), 1u);
}

// One caller copying each way in turn never has two copies running: the GPU's pool keeps one
// copy's threads (more would only spin beside it). Two callers at once grow it.
TEST(CopyEngine, ThePoolGrowsOnlyWhenCopiesOverlap) {
  fake::FakeDriver fake(10);
  CopyEngine engine(fake.api(), small_config(3, 128 << 10, 4));
  const std::size_t bytes = 3u << 20;
  auto src = pattern(bytes, 7);
  std::vector<unsigned char> back(bytes);
  CUdeviceptr dev = fake.alloc_device(bytes);
  CUstream s = fake.create_stream();
  for (int rep = 0; rep < 3; ++rep) {
    ASSERT_EQ(engine.copy({Direction::HostToDevice, src.data(), dev, bytes, s, false}).bytes_done,
              bytes);
    ASSERT_EQ(engine.copy({Direction::DeviceToHost, back.data(), dev, bytes, s, false}).bytes_done,
              bytes);
  }
  EXPECT_EQ(0, std::memcmp(back.data(), src.data(), bytes));
  auto lanes = engine.lanes();
  ASSERT_EQ(lanes.size(), 2u);
  for (const LaneInfo& l : lanes) EXPECT_EQ(l.pool_threads, 3u) << "one caller: one copy's threads";

  // Two callers, copies overlapping (the fake's DMAs take 10 us a piece): the pool grows.
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t)
    callers.emplace_back([&, t] {
      auto mine = pattern(bytes, 20 + t);
      std::vector<unsigned char> got(bytes);
      CUdeviceptr d = fake.alloc_device(bytes);
      CUstream st = fake.create_stream();
      for (int rep = 0; rep < 20; ++rep)
        if (engine.copy({Direction::HostToDevice, mine.data(), d, bytes, st, false}).bytes_done !=
                bytes ||
            engine.copy({Direction::DeviceToHost, got.data(), d, bytes, st, false}).bytes_done !=
                bytes ||
            std::memcmp(got.data(), mine.data(), bytes) != 0)
          ++wrong;
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  lanes = engine.lanes();
  ASSERT_FALSE(lanes.empty());
  const unsigned local = static_cast<unsigned>(gpu_locality("").cpus.size());
  EXPECT_EQ(lanes[0].pool_threads, pool_threads(3, local));
}

TEST(CopyEngine, AsyncCopiesOnOneStreamStayOrdered) {
  // Back-to-back H2D copies into one device buffer: the last one's bytes must win.
  fake::FakeDriver fake(30);
  CopyEngine engine(fake.api(), small_config(3, 64 << 10, 3));
  CUstream s = fake.create_stream();
  const std::size_t bytes = 2 << 20;
  CUdeviceptr dev = fake.alloc_device(bytes);
  std::vector<unsigned char> last;
  for (unsigned i = 0; i < 6; ++i) {
    last = pattern(bytes, 100 + i);
    auto src = last;
    ASSERT_EQ(engine.copy({Direction::HostToDevice, src.data(), dev, bytes, s, false}).bytes_done,
              bytes);
  }
  std::vector<unsigned char> back(bytes);
  ASSERT_EQ(engine.copy({Direction::DeviceToHost, back.data(), dev, bytes, s, false}).bytes_done,
            bytes);
  EXPECT_EQ(0, std::memcmp(back.data(), last.data(), bytes));
}

TEST(CopyEngineFaults, PinnedAllocationFailureDeclinesTheCopy) {
  fake::FakeDriver fake;
  fake.faults.host_register = CUDA_ERROR_OUT_OF_MEMORY;
  CopyEngine engine(fake.api(), small_config(2));
  std::vector<unsigned char> src(1 << 20, 1);
  CUdeviceptr dev = fake.alloc_device(src.size());
  CopyOutcome out =
      engine.copy({Direction::HostToDevice, src.data(), dev, src.size(), CU_STREAM_LEGACY, false});
  EXPECT_EQ(out.bytes_done, 0u);
  EXPECT_EQ(out.status, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(fake.dma_count.load(), 0);
}

TEST(CopyEngineFaults, EventCreationFailureDeclinesTheCopy) {
  fake::FakeDriver fake;
  fake.faults.event_create = CUDA_ERROR_OUT_OF_MEMORY;
  CopyEngine engine(fake.api(), small_config(2));
  std::vector<unsigned char> dst(1 << 20);
  CUdeviceptr dev = fake.alloc_device(dst.size());
  CopyOutcome out =
      engine.copy({Direction::DeviceToHost, dst.data(), dev, dst.size(), CU_STREAM_LEGACY, false});
  EXPECT_EQ(out.bytes_done, 0u);
  EXPECT_NE(out.status, CUDA_SUCCESS);
}

// With full-size pieces and with a ramp (whose first pieces are smaller), the outcome names the
// prefix of pieces that were handled, and nothing past it was written.
TEST(CopyEngineFaults, DmaFailureMidCopyReportsTheDonePrefix) {
  struct Case {
    std::size_t chunk, bytes;
  };
  for (Case c : {Case{64 << 10, (2 << 20) + 11}, Case{2 << 20, (16 << 20) + 11}})
    for (Direction dir : {Direction::HostToDevice, Direction::DeviceToHost}) {
      SCOPED_TRACE(testing::Message()
                   << "chunk=" << c.chunk << " h2d=" << (dir == Direction::HostToDevice));
      fake::FakeDriver fake(10);
      fake.faults.dma_fail_at = 5;
      CopyEngine engine(fake.api(), small_config(3, c.chunk, 4));
      const std::size_t bytes = c.bytes;
      auto host = pattern(bytes, 7);
      auto original = host;
      CUdeviceptr dev = fake.alloc_device(bytes);
      auto devbytes = pattern(bytes, 8);
      std::memcpy(reinterpret_cast<void*>(dev), devbytes.data(), bytes);
      CopyOutcome out = engine.copy({dir, host.data(), dev, bytes, CU_STREAM_LEGACY, false});
      EXPECT_EQ(out.status, CUDA_ERROR_ILLEGAL_ADDRESS);
      const CopyLayout l = plan_copy(bytes, 4, c.chunk);
      EXPECT_EQ(l.ramp > 0, c.chunk == (2u << 20));
      if (dir == Direction::HostToDevice) {
        EXPECT_EQ(out.bytes_done, l.piece_offset(5));  // five DMAs enqueued before the sixth
      } else {                                         // failed; D2H: those of the five that
        bool boundary = false;                         // had landed
        for (std::size_t i = 0; i <= 5; ++i) boundary |= out.bytes_done == l.piece_offset(i);
        EXPECT_TRUE(boundary) << out.bytes_done;
      }
      fake.synchronize_all();
      if (dir == Direction::HostToDevice) {
        // The done prefix arrived; nothing past the pieces that were enqueued was written.
        EXPECT_EQ(0, std::memcmp(reinterpret_cast<void*>(dev), original.data(), out.bytes_done));
        EXPECT_EQ(0, std::memcmp(reinterpret_cast<char*>(dev) + out.bytes_done,
                                 devbytes.data() + out.bytes_done, bytes - out.bytes_done));
      } else {
        EXPECT_EQ(0, std::memcmp(host.data(), devbytes.data(), out.bytes_done));
      }
    }
}

// At debug level a failed driver call leaves a breadcrumb naming the call, where it was made and
// the error; at the default level the engine says nothing of it (the interposer warns once).
TEST(CopyEngineFaults, FailedDriverCallsLeaveABreadcrumbNamingThem) {
  for (Direction dir : {Direction::HostToDevice, Direction::DeviceToHost}) {
    const bool h2d = dir == Direction::HostToDevice;
    for (const char* level : {"debug", "warn"}) {
      fake::FakeDriver fake(5);
      fake.faults.dma_fail_at = 2;
      CopyEngine engine(fake.api(), small_config(2));
      auto host = pattern(1 << 20, 3);
      CUdeviceptr dev = fake.alloc_device(1 << 20);
      set_log_level(level);
      testing::internal::CaptureStderr();
      CopyOutcome out = engine.copy({dir, host.data(), dev, 1 << 20, CU_STREAM_LEGACY, false});
      const std::string logged = testing::internal::GetCapturedStderr();
      set_log_level("warn");
      EXPECT_EQ(out.status, CUDA_ERROR_ILLEGAL_ADDRESS);
      const std::string call =
          h2d ? "driver_.memcpy_htod_async(device, slot.data, length, req_.stream) failed: "
              : "driver_.memcpy_dtoh_async(slot.data, device, length, req_.stream) failed: ";
      if (std::string(level) == "debug") {
        EXPECT_NE(logged.find("pipeline.cpp:"), std::string::npos) << logged;
        EXPECT_NE(logged.find(call + "CUDA error 700"), std::string::npos) << logged;
      } else {
        EXPECT_EQ(logged.find("failed"), std::string::npos) << logged;
      }
      fake.synchronize_all();
    }
  }
}

TEST(CopyEngineFaults, EventQueryFailureStopsWithoutHangOrWrongBytes) {
  for (Direction dir : {Direction::HostToDevice, Direction::DeviceToHost}) {
    fake::FakeDriver fake(50);
    fake.faults.query_fail_at = 3;
    CopyEngine engine(fake.api(), small_config(2, 64 << 10, 2));
    const std::size_t bytes = 1 << 20;
    auto host = pattern(bytes, 9);
    CUdeviceptr dev = fake.alloc_device(bytes);
    auto devbytes = pattern(bytes, 10);
    std::memcpy(reinterpret_cast<void*>(dev), devbytes.data(), bytes);
    CopyOutcome out = engine.copy({dir, host.data(), dev, bytes, CU_STREAM_LEGACY, false});
    EXPECT_LT(out.bytes_done, bytes);
    EXPECT_EQ(out.status, CUDA_ERROR_LAUNCH_FAILED);
    if (dir == Direction::DeviceToHost) {
      EXPECT_EQ(0, std::memcmp(host.data(), devbytes.data(), out.bytes_done));
    }
    // The engine rebuilds its ring and carries on with the next copy.
    fake.synchronize_all();
    round_trip(fake, engine, bytes + 3, 1, 0, CU_STREAM_LEGACY, false, 11);
  }
}

// A driver whose event queries keep failing breaks ring after ring. Each broken ring is leaked
// (a DMA may still touch it), so rebuilding it for every copy would leak pinned memory without
// end: after two the lane forwards for good.
TEST(CopyEngineFaults, ALaneThatKeepsBreakingForwardsInsteadOfLeakingRings) {
  for (Direction dir : {Direction::HostToDevice, Direction::DeviceToHost}) {
    fake::FakeDriver fake(5);
    fake.faults.query_fail_from = 0;
    CopyEngine engine(fake.api(), small_config(2, 64 << 10, 2));
    const std::size_t bytes = 1 << 20;
    auto host = pattern(bytes, 12);
    CUdeviceptr dev = fake.alloc_device(bytes);
    std::size_t forwarded = 0;
    for (int i = 0; i < 40; ++i) {
      CopyOutcome out = engine.copy({dir, host.data(), dev, bytes, CU_STREAM_LEGACY, false});
      EXPECT_LT(out.bytes_done, bytes);
      if (out.bytes_done == 0 && out.status == CUDA_ERROR_LAUNCH_FAILED) ++forwarded;
      fake.synchronize_all();
    }
    EXPECT_LE(fake.register_count.load(), 2);
    EXPECT_GE(forwarded, 38u);
  }
}

// The options allow rings far beyond the machine's memory (1024 slots of 1 GiB, per lane): the
// engine keeps all its pinned memory under an eighth of the machine's and forwards past that,
// before allocating anything, and says so once.
TEST(CopyEngineFaults, PinnedMemoryStaysUnderAShareOfTheMachine) {
  fake::FakeDriver fake(5);
  Config c = small_config(2, std::size_t{1} << 30, 1024);
  CopyEngine engine(fake.api(), c);
  std::vector<unsigned char> host(4 << 20, 1);
  CUdeviceptr dev = fake.alloc_device(host.size());
  testing::internal::CaptureStderr();
  for (Direction dir : {Direction::HostToDevice, Direction::DeviceToHost}) {
    CopyOutcome out = engine.copy({dir, host.data(), dev, host.size(), CU_STREAM_LEGACY, false});
    EXPECT_EQ(out.bytes_done, 0u);
    EXPECT_EQ(out.status, CUDA_ERROR_OUT_OF_MEMORY);
  }
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_EQ(fake.register_count.load(), 0);
  EXPECT_NE(logged.find("an eighth of this machine's memory"), std::string::npos) << logged;
  // Each lane that cannot be had says so, naming its GPU and direction: not only the first.
  EXPECT_NE(logged.find("host-to-device copies: 1024 staging buffers"), std::string::npos)
      << logged;
  EXPECT_NE(logged.find("device-to-host copies: 1024 staging buffers"), std::string::npos)
      << logged;
  // Within the share, the same engine's options build lanes as ever.
  CopyEngine fits(fake.api(), small_config(2));
  round_trip(fake, fits, (1 << 20) + 5, 1, 2, CU_STREAM_LEGACY, true, 5);
}

// A context that ends (cuCtxDestroy, cudaDeviceReset): its lanes go, their rings' memory and
// pinned budget with them, and copies after it build lanes anew, byte-exact, however often
// contexts end (a GPU's pool has room for kMaxQueues lanes' queues, kept for the lanes to come).
// Before the driver destroys it the rings' events are destroyed in it; after, none is touched,
// since the driver may have given its handles to new objects.
TEST(CopyEngine, LanesOfAContextThatEndsAreLetGo) {
  fake::FakeDriver fake(5);
  PinnedBudget budget(std::size_t{256} << 20);
  CopyEngine engine(fake.api(), small_config(2), budget);
  const CUcontext ctx = fake::fake_context(0);
  for (int end = 0; end < 2 * static_cast<int>(WorkerPool::kMaxQueues); ++end) {
    SCOPED_TRACE(end);
    const bool alive = end % 2 == 0;
    round_trip(fake, engine, (1 << 20) + 5, 1, 2, CU_STREAM_LEGACY, end % 3 == 0, end);
    ASSERT_EQ(engine.lanes().size(), 2u);
    EXPECT_GT(budget.taken(), 0u);
    const std::size_t destroyed = fake.destroyed_event_count();
    if (!alive) fake.end_context(ctx);  // the driver destroyed it, and a new one took its handle
    EXPECT_EQ(engine.forget_context(ctx, alive), 2u);
    EXPECT_TRUE(engine.lanes().empty());
    EXPECT_EQ(budget.taken(), 0u);
    EXPECT_EQ(fake.destroyed_event_count() - destroyed, alive ? 2u * 4 : 0u);
    EXPECT_EQ(fake.dead_handle_calls.load(), 0);  // no handle of the ended context reached CUDA
  }
  EXPECT_EQ(engine.forget_context(ctx, true), 0u);
  EXPECT_EQ(engine.forget_context(fake::fake_context(1), true), 0u);  // no lane of another
}

// A lane in use when its context ends (a program ending a context while another thread copies
// in it) is let go when the copy using it lets go of it, and never handed to a copy after. Its
// ring is leaked, not freed: that copy's last DMAs may be queued still.
TEST(CopyEngine, ALaneInUseWhenItsContextEndsGoesAtItsCopysEnd) {
  fake::FakeDriver fake(5);
  PinnedBudget budget(std::size_t{256} << 20);
  CopyEngine engine(fake.api(), small_config(2, 64 << 10, 2), budget);
  const CUcontext ctx = fake::fake_context(0);
  const std::size_t bytes = 4 << 20;  // 64 pieces through 2 slots: it waits on the paused DMAs
  auto src = pattern(bytes, 3);
  CUdeviceptr dev = fake.alloc_device(bytes);
  fake.pause_streams(true);
  std::thread copier([&] {
    EXPECT_EQ(
        engine.copy({Direction::HostToDevice, src.data(), dev, bytes, CU_STREAM_LEGACY, false})
            .bytes_done,
        bytes);
  });
  while (budget.taken() == 0) std::this_thread::yield();  // its lane built: held
  EXPECT_EQ(engine.forget_context(ctx, false), 1u);
  EXPECT_GT(budget.taken(), 0u);  // still in use
  fake.pause_streams(false);
  copier.join();
  fake.synchronize_all();
  const std::size_t leaked = budget.taken();
  EXPECT_GT(leaked, 0u);  // counted as long as it is leaked
  EXPECT_TRUE(engine.lanes().empty());
  EXPECT_EQ(0, std::memcmp(reinterpret_cast<void*>(dev), src.data(), bytes));
  round_trip(fake, engine, (1 << 20) + 5, 1, 2, CU_STREAM_LEGACY, true, 9);  // a new lane
  EXPECT_EQ(engine.lanes().size(), 2u);
  EXPECT_EQ(engine.forget_context(ctx, true), 2u);
  EXPECT_EQ(budget.taken(), leaked);
}

// One budget of pinned memory for the process: the device copier's rings and the peer copier's
// slots draw on it together, give it back when freed, and keep it when leaked.
TEST(PinnedBudget, RingsTakeAndGiveBackOneBudget) {
  PinnedBudget budget(8 << 20);
  {
    PinnedBudget::Hold a = budget.take(6 << 20);
    ASSERT_TRUE(a);
    EXPECT_FALSE(budget.take(3 << 20));  // would pass the limit: nothing taken
    EXPECT_EQ(budget.taken(), std::size_t{6} << 20);
    PinnedBudget::Hold kept = budget.take(1 << 20);
    kept.keep();  // leaked memory stays counted
  }
  EXPECT_EQ(budget.taken(), std::size_t{1} << 20);
  fake::FakeDriver fake(5);
  std::vector<unsigned char> host(1 << 20, 1);
  CUdeviceptr dev = fake.alloc_device(host.size());
  {
    // Two lanes (one each way) of 4 x 1 MiB fit 7 MiB of room only one at a time.
    CopyEngine engine(fake.api(), small_config(2, 1 << 20, 4), budget);
    EXPECT_EQ(
        engine
            .copy({Direction::HostToDevice, host.data(), dev, host.size(), CU_STREAM_LEGACY, true})
            .bytes_done,
        host.size());
    EXPECT_EQ(budget.taken(), std::size_t{5} << 20);
    testing::internal::CaptureStderr();
    CopyOutcome down = engine.copy(
        {Direction::DeviceToHost, host.data(), dev, host.size(), CU_STREAM_LEGACY, true});
    testing::internal::GetCapturedStderr();
    EXPECT_EQ(down.bytes_done, 0u);
    EXPECT_EQ(down.status, CUDA_ERROR_OUT_OF_MEMORY);
  }
  EXPECT_EQ(budget.taken(), std::size_t{1} << 20);  // the engine's ring went back with it
}

TEST(CopyEngineFaults, EventRecordFailureStopsCleanly) {
  fake::FakeDriver fake(10);
  fake.faults.record_fail_at = 2;
  CopyEngine engine(fake.api(), small_config(2, 64 << 10, 4));
  const std::size_t bytes = 1 << 20;
  auto host = pattern(bytes, 12);
  CUdeviceptr dev = fake.alloc_device(bytes);
  CopyOutcome out =
      engine.copy({Direction::HostToDevice, host.data(), dev, bytes, CU_STREAM_LEGACY, false});
  EXPECT_EQ(out.status, CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(out.bytes_done, plan_copy(bytes, 3, 64 << 10).piece_offset(3));  // the third DMA
  // was enqueued before its record failed
  fake.synchronize_all();
  EXPECT_EQ(0, std::memcmp(reinterpret_cast<void*>(dev), host.data(), out.bytes_done));
}

TEST(CopyEngineFaults, NoContextDeclines) {
  fake::FakeDriver fake;
  fake.faults.no_context = true;
  CopyEngine engine(fake.api(), small_config(2));
  std::vector<unsigned char> src(1 << 20);
  CUdeviceptr dev = fake.alloc_device(src.size());
  CopyOutcome out =
      engine.copy({Direction::HostToDevice, src.data(), dev, src.size(), CU_STREAM_LEGACY, false});
  EXPECT_EQ(out.bytes_done, 0u);
  EXPECT_EQ(fake.dma_count.load(), 0);
}

}  // namespace
}  // namespace cmt

namespace cmt {
namespace {

TEST(HostCopy, EveryMethodIsByteExactAtOddSizesAndAlignments) {
  auto src = pattern(70000, 77);
  for (std::size_t n : {0u, 1u, 63u, 64u, 127u, 128u, 4097u, 65536u + 13u}) {
    for (std::size_t so : {0u, 1u, 31u}) {
      for (std::size_t d_off : {0u, 3u, 64u}) {
        for (auto* fn : {&copy_memcpy, &copy_streaming}) {
          std::vector<unsigned char> dst(n + d_off + 8, 0xEE);
          fn(dst.data() + d_off, src.data() + so, n);
          ASSERT_EQ(0, std::memcmp(dst.data() + d_off, src.data() + so, n)) << n << " " << so;
          for (std::size_t i = 0; i < d_off; ++i) ASSERT_EQ(dst[i], 0xEE);
          for (std::size_t i = d_off + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE);
        }
      }
    }
  }
}

// A profile's [gpu."BUS"] knobs shape that GPU's lanes only; CMT_* variables still win.
TEST(CopyEngine, PerGpuKnobsShapeThatGpusLanes) {
  fake::FakeDriver fake(5);
  fake.pci_bus_id = "0000:1B:00.0";
  Config c = small_config(2);
  c.per_gpu["0000:1b:00.0"] = {{"threads", "3"}, {"slots", "5"}};
  c.per_gpu["0000:99:00.0"] = {{"threads", "7"}};
  {
    CopyEngine engine(fake.api(), c);
    round_trip(fake, engine, (1 << 20) + 5, 1, 0, CU_STREAM_LEGACY, true, 3);
    auto lanes = engine.lanes();
    ASSERT_EQ(lanes.size(), 2u);
    for (const LaneInfo& l : lanes) {
      EXPECT_EQ(l.threads, 3u);
      EXPECT_EQ(l.slots, 5u);
      EXPECT_EQ(l.slot_bytes, c.chunk_bytes);
    }
  }
  c.origin["threads"] = "env CMT_THREADS";
  CopyEngine engine(fake.api(), c);
  round_trip(fake, engine, 4096 * 3, 0, 0, CU_STREAM_LEGACY, true, 4);
  for (const LaneInfo& l : engine.lanes()) {
    EXPECT_EQ(l.threads, 2u);  // the variable's value, not the profile's per-GPU one
    EXPECT_EQ(l.slots, 5u);
  }
}

// Device-to-host lanes stage through d2h_chunk_bytes buffers, host-to-device ones through
// chunk_bytes ones; long copies use the larger D2H pieces, and every size stays byte-exact.
TEST(CopyEngine, DeviceToHostLanesHaveTheirOwnSlotSize) {
  fake::FakeDriver fake(5);
  Config c = small_config(3, 16 << 10, 6);
  c.d2h_chunk_bytes = 64 << 10;
  CopyEngine engine(fake.api(), c);
  // Around 64 pieces of 16 KiB (1 MiB) and of 64 KiB (4 MiB): medium pieces, growing ones,
  // slot-sized ones.
  for (std::size_t bytes : {std::size_t{1} << 20, (std::size_t{1} << 20) + 12345,
                            std::size_t{3} << 20, (std::size_t{4} << 20) - 7, std::size_t{9} << 20})
    round_trip(fake, engine, bytes, bytes % 7, bytes % 5, CU_STREAM_LEGACY, bytes % 2 == 0, 11);
  auto lanes = engine.lanes();
  ASSERT_EQ(lanes.size(), 2u);
  for (const LaneInfo& l : lanes)
    EXPECT_EQ(l.slot_bytes, l.direction == Direction::DeviceToHost ? std::size_t{64} << 10
                                                                   : std::size_t{16} << 10);
}

// A lane's first copy waits for the lane to be built (its ring's memory faulted in and
// registered, the GPU's copy threads started: 12-35 ms on the H100, lab/NOTES.md 86); each lane
// keeps what its build took, part by part. The second lane of the GPU finds the threads running.
TEST(CopyEngine, EachLaneKeepsWhatBuildingItTook) {
  fake::FakeDriver fake(5);
  fake.faults.host_register_us = 3000;  // pinning its pages takes a while, as in CUDA
  CopyEngine engine(fake.api(), small_config(3, 64 << 10, 4));
  round_trip(fake, engine, (1u << 20) + 77, 3, 5, CU_STREAM_LEGACY, false, 21);
  auto lanes = engine.lanes();
  ASSERT_EQ(lanes.size(), 2u);  // one each way
  std::sort(lanes.begin(), lanes.end(), [](const LaneInfo& a, const LaneInfo& b) {
    return a.direction == Direction::HostToDevice && b.direction != Direction::HostToDevice;
  });
  for (const LaneInfo& l : lanes) {
    EXPECT_GE(l.ring_build.register_ns, 3'000'000) << "the fake's registration was not timed";
    EXPECT_GT(l.ring_build.fault_ns, 0);
    EXPECT_GE(l.ring_build.events_ns, 0);
    EXPECT_GE(l.build_ns, l.ring_build.fault_ns + l.ring_build.register_ns +
                              l.ring_build.events_ns + l.threads_start_ns)
        << "the parts add up to more than the whole";
  }
  EXPECT_GT(lanes[0].threads_start_ns, 0) << "the first lane started the GPU's threads";
  EXPECT_EQ(lanes[1].threads_start_ns, 0) << "the second lane found them running";
}

// The ring's memory is 2 MiB aligned and asks for transparent huge pages: its build faults it in
// inside a program's first copy, one fault per 2 MiB instead of 512 (lab/NOTES.md 87). The kernel
// keeps the request in the mapping's flags ("hg" in /proc/self/smaps) whether or not it had huge
// pages to give.
TEST(StagingRing, AsksForHugePagesOnAlignedMemory) {
  if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0)
    GTEST_SKIP() << "a kernel built without transparent huge pages";
  fake::FakeDriver fake(5);
  PinnedBudget budget(std::size_t{64} << 20);
  CUresult error = CUDA_SUCCESS;
  auto ring = StagingRing::create(fake.api(), 3, std::size_t{2} << 20, -1,
                                  budget.take(std::size_t{6} << 20), &error);
  ASSERT_TRUE(ring) << error;
  const auto first = reinterpret_cast<std::uintptr_t>(ring->slot(0).data);
  EXPECT_EQ(first % (std::size_t{2} << 20), 0u);
  std::memset(ring->slot(2).data, 7, ring->slot_bytes());  // the whole ring is mapped and writable
  std::FILE* smaps = std::fopen("/proc/self/smaps", "r");
  ASSERT_NE(smaps, nullptr);
  char line[512];
  bool inside = false, flagged = false, found = false;
  while (std::fgets(line, sizeof line, smaps)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
      inside = lo <= first && first < hi;
      found = found || inside;
      continue;
    }
    if (inside && std::strncmp(line, "VmFlags:", 8) == 0)
      flagged = std::strstr(line, " hg") != nullptr;
  }
  std::fclose(smaps);
  EXPECT_TRUE(found);
  EXPECT_TRUE(flagged) << "the ring did not ask for huge pages";
}

// With a queue, the ring's whole 2 MiB blocks are faulted in by the queue's threads, a block each
// (one thread took most of a lane's build: lab/NOTES.md 88), and any part outside whole blocks by
// the caller: the ring comes out resident and zero either way.
TEST(StagingRing, IsFaultedInByTheQueuesThreads) {
  if (!can_populate()) GTEST_SKIP() << "a kernel without MADV_POPULATE_WRITE";
  fake::FakeDriver fake(5);
  PinnedBudget budget(std::size_t{64} << 20);
  WorkerPool pool(4, {});
  WorkQueue* queue = pool.add_queue(4);
  ASSERT_NE(queue, nullptr);
  const long page = sysconf(_SC_PAGESIZE);
  for (const std::size_t slot : {std::size_t{2} << 20, (std::size_t{1} << 20) + 4096}) {
    CUresult error = CUDA_SUCCESS;
    auto ring = StagingRing::create(fake.api(), 6, slot, -1, budget.take(6 * slot), &error, queue);
    ASSERT_TRUE(ring) << error;
    const std::size_t bytes = 6 * ring->slot_bytes();
    EXPECT_EQ(queue->finished(), bytes / (std::size_t{2} << 20)) << "whole blocks, one unit each";
    std::vector<unsigned char> resident((bytes + page - 1) / page);
    ASSERT_EQ(mincore(ring->slot(0).data, bytes, resident.data()), 0);
    for (std::size_t i = 0; i < resident.size(); ++i)
      ASSERT_TRUE(resident[i] & 1)
          << "page " << i << " of " << resident.size() << " not faulted in";
    for (std::size_t i = 0; i < bytes; i += 997)
      ASSERT_EQ(ring->slot(0).data[i], 0) << "byte " << i;
  }
}

// CMT_LOG=debug traces each copy, and for H2D waits for its DMAs to say when each completed:
// the copies stay byte-exact and the trace names every piece.
TEST(CopyEngine, TracedCopiesAreByteExactAndLogged) {
  fake::FakeDriver fake(5);
  CopyEngine engine(fake.api(), small_config(3));
  set_log_level("debug");
  testing::internal::CaptureStderr();
  round_trip(fake, engine, (1 << 20) + 4099, 3, 5, CU_STREAM_LEGACY, false, 41);
  const std::string logged = testing::internal::GetCapturedStderr();
  set_log_level("warn");
  EXPECT_NE(logged.find("H2D 1028 KiB"), std::string::npos) << logged;
  EXPECT_NE(logged.find("H2D DMAs enqueued at (us): "), std::string::npos) << logged;
  EXPECT_NE(logged.find("completed by: "), std::string::npos) << logged;
  EXPECT_NE(logged.find("D2H 1028 KiB"), std::string::npos) << logged;
}

TEST(CopyEngine, EveryStagingAndDrainMethodRoundTrips) {
  fake::FakeDriver fake(5);
  for (CopyMethod h2d : {CopyMethod::Memcpy, CopyMethod::Streaming})
    for (CopyMethod d2h : {CopyMethod::Memcpy, CopyMethod::Streaming}) {
      Config c = small_config(3);
      c.h2d_method = h2d;
      c.d2h_method = d2h;
      CopyEngine engine(fake.api(), c);
      round_trip(fake, engine, (3 << 20) + 17, 5, 3, CU_STREAM_LEGACY, false, 99);
      round_trip(fake, engine, (1 << 20) + 3, 0, 1, CU_STREAM_PER_THREAD, true, 7);
    }
}

// An anonymous mapping no page of which was ever touched, unmapped on destruction.
struct FreshMapping {
  explicit FreshMapping(std::size_t n) : bytes(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
  }
  ~FreshMapping() {
    if (data) munmap(data, bytes);
  }
  bool resident(std::size_t off) const {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    unsigned char in_core = 0;
    return mincore(data + off / page * page, 1, &in_core) == 0 && (in_core & 1);
  }
  unsigned char* data;
  std::size_t bytes;
};

TEST(FreshPages, WholeBlocksAreTheAligned2MiBBlocksInside) {
  auto* at = reinterpret_cast<char*>(std::uintptr_t{64} << 20);
  FreshBlocks b = whole_blocks(at + 1, 6u << 20);  // [64M+1, 70M+1): 66M..70M
  EXPECT_EQ(b.first, at + (2u << 20));
  EXPECT_EQ(b.count, 2u);
  b = whole_blocks(at, 6u << 20);
  EXPECT_EQ(b.first, at);
  EXPECT_EQ(b.count, 3u);
  EXPECT_EQ(whole_blocks(at + 1, 4u << 20).count, 1u);        // 66M..68M
  EXPECT_EQ(whole_blocks(at + 1, (4u << 20) - 2).count, 0u);  // ends just short of 68M
  EXPECT_EQ(whole_blocks(at + 1, (2u << 20) + 5).count, 0u);
  EXPECT_EQ(whole_blocks(at, 0).count, 0u);
}

// MADV_POPULATE_WRITE came with Linux 5.14: the probe must say so.
TEST(FreshPages, KnowsWhetherTheKernelCanPopulate) {
  utsname u{};
  ASSERT_EQ(uname(&u), 0);
  unsigned major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(u.release, "%u.%u", &major, &minor), 2) << u.release;
  EXPECT_EQ(can_populate(), major > 5 || (major == 5 && minor >= 14)) << u.release;
}

TEST(FreshPages, SpotsNeverWrittenMemoryAndPopulatesItAsZeros) {
  FreshMapping m(8u << 20);
  ASSERT_NE(m.data, nullptr);
  FreshBlocks b = whole_blocks(m.data + 100, m.bytes - 200);
  ASSERT_GE(b.count, 2u);
  const std::size_t first = static_cast<std::size_t>(b.first - reinterpret_cast<char*>(m.data));
  // malloc's chunk header, in the page before the blocks, does not count.
  m.data[first - 1] = 1;
  EXPECT_TRUE(looks_fresh(b));
  advise_huge_pages(b);
  if (!populate_block(b, 1)) GTEST_SKIP() << "this kernel cannot MADV_POPULATE_WRITE (< 5.14)";
  EXPECT_TRUE(m.resident(first + kFreshBlock));
  EXPECT_TRUE(m.resident(first + 2 * kFreshBlock - 1));
  for (std::size_t i = 0; i < kFreshBlock; ++i) ASSERT_EQ(m.data[first + kFreshBlock + i], 0) << i;
  EXPECT_FALSE(populate_block(b, b.count));  // out of range: refused, nothing touched
  EXPECT_FALSE(looks_fresh(b));              // block 1 holds the middle sample
  // The first or the last page of the blocks written: not fresh.
  FreshMapping other(8u << 20);
  FreshBlocks ob = whole_blocks(other.data + 100, other.bytes - 200);
  EXPECT_TRUE(looks_fresh(ob));
  ob.first[0] = 1;
  EXPECT_FALSE(looks_fresh(ob));
  FreshMapping last(8u << 20);
  FreshBlocks lb = whole_blocks(last.data + 100, last.bytes - 200);
  lb.first[lb.count * kFreshBlock - 1] = 1;
  EXPECT_FALSE(looks_fresh(lb));
  std::vector<unsigned char> used(8u << 20, 1);
  EXPECT_FALSE(looks_fresh(whole_blocks(used.data(), used.size())));
  EXPECT_FALSE(looks_fresh(FreshBlocks{}));
}

// D2H into never-written memory, each way of preparing it: every byte lands, nothing around the
// copy changes, and the debug trace says whether the destination was prepared.
TEST(CopyEngine, FreshDestinationsAreByteExactEachWay) {
  const std::size_t bytes = (12u << 20) + 4093, off = 777;
  fake::FakeDriver fake(5);
  auto src = pattern(bytes, 3);
  CUdeviceptr dev = fake.alloc_device(bytes);
  std::memcpy(reinterpret_cast<void*>(dev), src.data(), bytes);
  for (FreshPages mode : {FreshPages::Off, FreshPages::Populate, FreshPages::Huge}) {
    SCOPED_TRACE(choice_name(mode));
    Config c = small_config(3, 1 << 20, 4);
    c.fresh_pages = mode;
    CopyEngine engine(fake.api(), c);
    FreshMapping m(bytes + 2 * off);
    ASSERT_NE(m.data, nullptr);
    m.data[0] = 0;  // the first page is in use, as malloc's chunk header makes it
    set_log_level("debug");
    testing::internal::CaptureStderr();
    CopyOutcome out =
        engine.copy({Direction::DeviceToHost, m.data + off, dev, bytes, CU_STREAM_LEGACY, false});
    const std::string logged = testing::internal::GetCapturedStderr();
    set_log_level("warn");
    ASSERT_EQ(out.status, CUDA_SUCCESS);
    ASSERT_EQ(out.bytes_done, bytes);
    ASSERT_EQ(0, std::memcmp(m.data + off, src.data(), bytes));
    for (std::size_t i = 0; i < off; ++i) ASSERT_EQ(m.data[i], 0);
    for (std::size_t i = off + bytes; i < m.bytes; ++i) ASSERT_EQ(m.data[i], 0);
    EXPECT_EQ(logged.find("fresh destination") != std::string::npos, mode != FreshPages::Off)
        << logged;
    // 12 MiB from an odd offset inside a page-aligned mapping: 5 or 6 whole 2 MiB blocks.
    if (mode == FreshPages::Off)
      EXPECT_EQ(out.fresh_bytes, 0u);
    else
      EXPECT_TRUE(out.fresh_bytes == 5 * kFreshBlock || out.fresh_bytes == 6 * kFreshBlock)
          << out.fresh_bytes;
    // The same destination again is no longer fresh: copied as usual.
    out = engine.copy({Direction::DeviceToHost, m.data + off, dev, bytes, CU_STREAM_LEGACY, false});
    ASSERT_EQ(out.bytes_done, bytes);
    EXPECT_EQ(out.fresh_bytes, 0u);
    // Below 8 MiB a fresh destination is copied as usual too.
    FreshMapping small(8u << 20);
    out = engine.copy(
        {Direction::DeviceToHost, small.data, dev, (8u << 20) - 1, CU_STREAM_LEGACY, false});
    ASSERT_EQ(out.bytes_done, (8u << 20) - 1);
    EXPECT_EQ(out.fresh_bytes, 0u);
    ASSERT_EQ(0, std::memcmp(small.data, src.data(), (8u << 20) - 1));
  }
}

// The third DMA's event failing while the destination is still being populated (one thread, 32
// blocks, where the fake DMAs land within microseconds): the two pieces that landed still reach
// the user's buffer, and the outcome says so.
TEST(CopyEngineFaults, QueryFailureWhilePopulatingDrainsWhatLanded) {
  const std::size_t bytes = 64u << 20;
  fake::FakeDriver fake(10);
  Config c = small_config(1, 2 << 20, 4);
  c.fresh_pages = FreshPages::Populate;
  CopyEngine engine(fake.api(), c);
  auto src = pattern(bytes, 5);
  CUdeviceptr dev = fake.alloc_device(bytes);
  std::memcpy(reinterpret_cast<void*>(dev), src.data(), bytes);
  FreshMapping m(bytes);
  ASSERT_NE(m.data, nullptr);
  fake.faults.query_fail_record = 2;
  CopyOutcome out =
      engine.copy({Direction::DeviceToHost, m.data, dev, bytes, CU_STREAM_LEGACY, false});
  EXPECT_EQ(out.status, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(out.bytes_done, plan_copy(bytes, 2, 2 << 20).piece_offset(2));
  EXPECT_EQ(0, std::memcmp(m.data, src.data(), out.bytes_done));
  fake.synchronize_all();
}

}  // namespace
}  // namespace cmt
