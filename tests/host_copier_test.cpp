// The host leg's parts, called directly: the map of CUDA host memory, the host copier's copies and
// the host leg's decisions (the libc hooks over them are tested end to end by host_copy.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "common/thread_context.h"
#include "engine/host/host_copier.h"
#include "interposer/host_leg.h"
#include "interposer/host_memory.h"

namespace cmt {
namespace {

TEST(HostMemoryMap, FindsOverlapsAndForgetsRemovedRanges) {
  HostMemoryMap map;
  std::vector<char> a(1000), b(1000);
  EXPECT_FALSE(map.overlaps(a.data(), a.size()));
  ASSERT_TRUE(map.add(a.data() + 100, 500));
  EXPECT_TRUE(map.overlaps(a.data() + 100, 1));
  EXPECT_TRUE(map.overlaps(a.data() + 599, 1));
  EXPECT_TRUE(map.overlaps(a.data(), 101));      // ends inside
  EXPECT_FALSE(map.overlaps(a.data(), 100));     // ends just before
  EXPECT_FALSE(map.overlaps(a.data() + 600, 1));  // starts just after
  EXPECT_FALSE(map.overlaps(b.data(), b.size()));
  ASSERT_TRUE(map.add(a.data() + 100, 10));  // the same base again: the new size
  EXPECT_FALSE(map.overlaps(a.data() + 200, 1));
  EXPECT_EQ(map.size(), 1u);
  map.remove(a.data() + 100);
  EXPECT_FALSE(map.overlaps(a.data(), a.size()));
  EXPECT_EQ(map.size(), 0u);
  EXPECT_FALSE(map.add(nullptr, 10));
}

TEST(HostMemoryMap, ReusesFreedEntriesAndRefusesPastItsCapacity) {
  static HostMemoryMap map;  // 64 KiB: not on the stack
  std::vector<char> arena(HostMemoryMap::kCapacity + 1);
  for (std::size_t i = 0; i < HostMemoryMap::kCapacity; ++i) ASSERT_TRUE(map.add(&arena[i], 1));
  EXPECT_FALSE(map.add(&arena[HostMemoryMap::kCapacity], 1));
  map.remove(&arena[7]);
  EXPECT_TRUE(map.add(&arena[HostMemoryMap::kCapacity], 1));
  EXPECT_TRUE(map.overlaps(&arena[HostMemoryMap::kCapacity], 1));
  EXPECT_FALSE(map.overlaps(&arena[7], 1));
}

Config host_config(HostCopy mode) {
  Config c;
  c.host_copy = mode;
  c.spin_us = 50;
  return c;
}

TEST(HostCopier, CopiesByteExactAtOddSizesAndOffsets) {
  HostCopier copier(host_config(HostCopy::All), 3, {});
  std::mt19937_64 rng(5);
  std::vector<unsigned char> src(40u << 20), dst(40u << 20);
  for (auto& c : src) c = static_cast<unsigned char>(rng());
  for (std::size_t n : {std::size_t{1}, std::size_t{4097}, std::size_t{(1u << 20) + 3},
                        std::size_t{(9u << 20) + 77}, std::size_t{(33u << 20) + 1}}) {
    const std::size_t so = rng() % 64, d_off = rng() % 64;
    std::memset(dst.data(), 0, dst.size());
    ASSERT_TRUE(copier.copy(dst.data() + d_off, src.data() + so, n));
    EXPECT_EQ(std::memcmp(dst.data() + d_off, src.data() + so, n), 0) << n;
    if (d_off) {
      EXPECT_EQ(dst[d_off - 1], 0) << n;
    }
    EXPECT_EQ(dst[d_off + n], 0) << n;
  }
  EXPECT_EQ(copier.counts().calls, 5u);
}

TEST(HostCopier, FreshDestinationsArePreparedAndCopiedRight) {
  HostCopier copier(host_config(HostCopy::All), 2, {});
  const std::size_t n = 32u << 20;
  std::vector<unsigned char> src(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  // Never written: as a new buffer from malloc or mmap.
  std::unique_ptr<unsigned char[]> fresh(new unsigned char[n + 4096]);
  ASSERT_TRUE(copier.copy(fresh.get() + 1, src.data(), n));
  EXPECT_EQ(std::memcmp(fresh.get() + 1, src.data(), n), 0);
}

// The host leg's decisions, on a leg of the test's own (its own map of CUDA host memory).
TEST(HostLeg, TakesOnlyWhatItShould) {
  std::vector<char> a(4u << 20), b(4u << 20);
  HostCopier copier(host_config(HostCopy::All), 2, {});
  HostMemoryMap map;
  HostLeg all(&map), pinned(&map);
  // Not armed (as in a forked child): nothing is taken.
  EXPECT_FALSE(all.take_copy(b.data(), a.data(), a.size()));
  Config c = host_config(HostCopy::All);
  c.host_copy_threshold = 1u << 20;
  all.arm(copier, c);
  c.host_copy = HostCopy::Pinned;
  pinned.arm(copier, c);
  EXPECT_TRUE(all.take_copy(b.data(), a.data(), a.size()));
  EXPECT_FALSE(all.take_copy(b.data(), a.data(), (1u << 20) - 1));  // under the threshold
  EXPECT_FALSE(all.take_copy(b.data(), a.data(), 0));
  // Overlapping ranges keep memmove's meaning through libc, whichever call it was.
  EXPECT_FALSE(all.take_copy(a.data() + 1, a.data(), a.size() - 1));
  EXPECT_FALSE(all.take_copy(a.data(), a.data() + 4096, a.size() - 4096));
  // pinned: only copies that touch CUDA host memory.
  EXPECT_FALSE(pinned.take_copy(b.data(), a.data(), a.size()));
  map.add(b.data(), b.size());
  EXPECT_TRUE(pinned.take_copy(b.data(), a.data(), a.size()));
  EXPECT_TRUE(pinned.take_copy(a.data(), b.data(), a.size()));
  map.remove(b.data());
  EXPECT_FALSE(pinned.take_copy(b.data(), a.data(), a.size()));
  // cmt's own code (a hook, the engine) and an opted-out thread copy with libc.
  {
    InsideCmt inside;
    EXPECT_FALSE(all.take_copy(b.data(), a.data(), a.size()));
  }
  t_thread.opted_out = true;
  EXPECT_FALSE(all.take_copy(b.data(), a.data(), a.size()));
  t_thread.opted_out = false;
  // Disarmed (the forked-child rule): libc's again.
  all.disarm();
  EXPECT_FALSE(all.take_copy(b.data(), a.data(), a.size()));
  EXPECT_EQ(copier.counts().calls, 3u);
}

TEST(HostCopier, ManyThreadsAtOnceEachGetTheirBytes) {
  HostCopier copier(host_config(HostCopy::All), 2, {});
  std::atomic<long> wrong{0}, declined{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      std::vector<unsigned char> src(3u << 20), dst(3u << 20);
      for (int round = 0; round < 30; ++round) {
        std::memset(src.data(), t * 31 + round, src.size());
        if (!copier.copy(dst.data(), src.data(), src.size())) {
          declined.fetch_add(1);  // another thread held the copier: the caller uses libc
          continue;
        }
        if (std::memcmp(dst.data(), src.data(), src.size()) != 0) wrong.fetch_add(1);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(copier.counts().busy, static_cast<std::uint64_t>(declined.load()));
  EXPECT_GT(copier.counts().calls, 0u);
}

TEST(HostLeg, FillsByteExactAndTakesOnlyWhatItShould) {
  Config c = host_config(HostCopy::Off);
  c.host_fill_threshold = 1u << 20;
  HostCopier copier(c, 2, {});
  HostMemoryMap map;
  HostLeg fresh_only(&map), all(&map);
  const std::size_t n = (16u << 20) + 5;
  std::vector<unsigned char> written(n + 2, 7);
  // Not armed: nothing is taken.
  EXPECT_FALSE(all.take_fill(written.data() + 1, 0, n));
  c.host_fill = HostFill::Fresh;
  fresh_only.arm(copier, c);
  c.host_fill = HostFill::All;
  all.arm(copier, c);
  // fresh: a buffer already written is libc's; all: taken, byte-exact, the ends untouched.
  EXPECT_FALSE(fresh_only.take_fill(written.data() + 1, 0, n));
  ASSERT_TRUE(all.take_fill(written.data() + 1, 0x5A, n));
  EXPECT_EQ(written[0], 7);
  EXPECT_EQ(written[n + 1], 7);
  EXPECT_EQ(std::count(written.begin() + 1, written.begin() + 1 + static_cast<long>(n), 0x5A),
            static_cast<long>(n));
  // A new buffer (no page of it touched yet) is taken in fresh mode, where the kernel can populate.
  std::unique_ptr<unsigned char[]> fresh(new unsigned char[n]);
  const std::uint64_t fills_before = copier.counts().fill_calls;
  if (fresh_only.take_fill(fresh.get(), 0, n)) {
    EXPECT_EQ(std::count(fresh.get(), fresh.get() + n, 0), static_cast<long>(n));
    EXPECT_GT(copier.counts().fill_fresh_bytes, 0u);
  }
  // cmt's own code fills with libc.
  {
    InsideCmt inside;
    EXPECT_FALSE(all.take_fill(written.data(), 1, n));
  }
  // The copy side is off: copies are never taken.
  EXPECT_FALSE(all.take_copy(written.data(), written.data() + n / 2, n / 4));
  EXPECT_GE(copier.counts().fill_calls, fills_before);
  EXPECT_GE(copier.counts().fill_bytes, n);
}

}  // namespace
}  // namespace cmt
