// The engine against the fake driver: byte-exact copies over sizes, offsets, directions, streams
// and threads, and injected driver failures that must end in the right outcome, never a hang.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "copy_engine.h"
#include "fake_driver.h"
#include "host_copy.h"

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
  c.slots = slots;
  c.threshold = 0;
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

TEST(CopyLayout, PiecesForTheLinkUnitsForTheWorkers) {
  CopyLayout l = plan_copy(1, 8, 2 << 20);
  EXPECT_EQ(l.pieces, 1u);
  EXPECT_EQ(l.piece_length(0), 1u);
  l = plan_copy(16 << 20, 8, 2 << 20);
  EXPECT_EQ(l.piece, 2u << 20);
  EXPECT_EQ(l.pieces, 8u);
  EXPECT_EQ(l.unit, 256u << 10);
  EXPECT_EQ(l.units_per_piece, 8u);
  l = plan_copy(4 << 20, 8, 2 << 20);
  EXPECT_EQ(l.piece, 512u << 10);
  EXPECT_EQ(l.unit, 64u << 10);
  l = plan_copy((1ull << 30) + 5, 9, 2 << 20);
  EXPECT_EQ(l.piece, 2u << 20);
  EXPECT_EQ(l.pieces, 513u);
  EXPECT_EQ(l.piece_length(512), 5u);
  EXPECT_EQ(l.unit, 233472u);  // 2 MiB / 9, rounded up to 4 KiB
  EXPECT_EQ(l.units_per_piece, 9u);
  l = plan_copy(1ull << 30, 8, 4096);
  EXPECT_EQ(l.piece, 4096u);
  EXPECT_EQ(l.units_per_piece, 1u);
  EXPECT_EQ(auto_threads(16), 8u);
  EXPECT_EQ(auto_threads(2), 1u);
  EXPECT_EQ(auto_threads(64), 8u);
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

// Ten threads on four streams at once, byte-exact, with one lane per direction (the default:
// they take turns) and with three (concurrent copies get lanes of their own, up to three).
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

TEST(CopyEngineFaults, DmaFailureMidCopyReportsTheDonePrefix) {
  for (Direction dir : {Direction::HostToDevice, Direction::DeviceToHost}) {
    fake::FakeDriver fake(10);
    fake.faults.dma_fail_at = 5;
    CopyEngine engine(fake.api(), small_config(3, 64 << 10, 4));
    const std::size_t bytes = (2 << 20) + 11;
    auto host = pattern(bytes, 7);
    auto original = host;
    CUdeviceptr dev = fake.alloc_device(bytes);
    auto devbytes = pattern(bytes, 8);
    std::memcpy(reinterpret_cast<void*>(dev), devbytes.data(), bytes);
    CopyOutcome out = engine.copy({dir, host.data(), dev, bytes, CU_STREAM_LEGACY, false});
    EXPECT_EQ(out.status, CUDA_ERROR_ILLEGAL_ADDRESS);
    const std::size_t piece = plan_copy(bytes, 4, 64 << 10).piece;
    if (dir == Direction::HostToDevice)
      EXPECT_EQ(out.bytes_done, 5 * piece);  // five DMAs were enqueued before the sixth failed
    else
      EXPECT_LE(out.bytes_done, 5 * piece);  // those of the five that had landed
    EXPECT_EQ(out.bytes_done % piece, 0u);
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
  const std::size_t piece = plan_copy(bytes, 3, 64 << 10).piece;
  EXPECT_EQ(out.bytes_done, 3 * piece);  // the third DMA was enqueued before its record failed
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

TEST(CopyEngine, AutoStagingStreamsBelow32MiB) {
  EXPECT_TRUE(stage_with_streaming_stores(CopyMethod::Auto, 4u << 20));
  EXPECT_FALSE(stage_with_streaming_stores(CopyMethod::Auto, 32u << 20));
  EXPECT_TRUE(stage_with_streaming_stores(CopyMethod::Streaming, 1u << 30));
  EXPECT_FALSE(stage_with_streaming_stores(CopyMethod::Memcpy, 4u << 20));
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

}  // namespace
}  // namespace cmt
