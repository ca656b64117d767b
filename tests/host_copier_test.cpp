// The host leg's parts, called directly: the map of CUDA host memory, the host copier's copies and
// the host leg's decisions (the libc hooks over them are tested end to end by host_copy.sh).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cmt_fault_handler.h"
#include "common/engine_rules.h"
#include "common/thread_context.h"
#include "engine/host/host_copier.h"
#include "engine/shared/fresh_pages.h"
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

// A context that ends frees its host memory and drops its registrations: their records go, and
// those of other contexts stay.
TEST(HostMemoryMap, ForgetsTheRangesOfAContextThatEnds) {
  HostMemoryMap map;
  std::vector<char> a(1000), b(1000), c(1000);
  int first = 0, second = 0;  // stand-ins for two contexts
  ASSERT_TRUE(map.add(a.data(), a.size(), &first));
  ASSERT_TRUE(map.add(b.data(), b.size(), &second));
  ASSERT_TRUE(map.add(c.data(), c.size(), &first));
  EXPECT_EQ(map.forget_context(&first), 2u);
  EXPECT_FALSE(map.overlaps(a.data(), a.size()));
  EXPECT_FALSE(map.overlaps(c.data(), c.size()));
  EXPECT_TRUE(map.overlaps(b.data(), b.size()));
  EXPECT_EQ(map.forget_context(&first), 0u);
  ASSERT_TRUE(map.add(b.data(), 10, &first));  // the same base, allocated anew in another
  EXPECT_EQ(map.forget_context(&second), 0u);
  EXPECT_EQ(map.forget_context(&first), 1u);
  EXPECT_EQ(map.size(), 0u);
}

TEST(HostMemoryMap, ReusesFreedEntriesAndRefusesPastItsCapacity) {
  // 64 KiB: not on the stack; a new one each run (a static one stayed full for a repeated run).
  auto owned = std::make_unique<HostMemoryMap>();
  HostMemoryMap& map = *owned;
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

// host_copy = pinned with file reads into CUDA host memory alone (the built-in host_reads, all,
// takes reads into any memory of files in the page cache too).
Config pinned_reads_config() {
  Config c = host_config(HostCopy::Pinned);
  c.host_reads = HostReads::Pinned;
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

// A temporary file of `n` pattern bytes, removed with the object.
class PatternFile {
 public:
  explicit PatternFile(std::size_t n) : bytes(n) {
    char name[] = "/tmp/cmt-read-XXXXXX";
    fd = mkstemp(name);
    unlink(name);
    std::mt19937_64 rng(11);
    for (auto& c : bytes) c = static_cast<unsigned char>(rng());
    if (fd >= 0 && write(fd, bytes.data(), n) != static_cast<ssize_t>(n)) {
      close(fd);
      fd = -1;
    }
  }
  ~PatternFile() {
    if (fd >= 0) close(fd);
  }
  int fd = -1;
  std::vector<unsigned char> bytes;
};

// read_file returns what one pread of the whole would: at odd offsets and sizes, across the end of
// the file (short), past it (0), and failing (EBADF, EISDIR, EFAULT), never touching a byte past
// what it says it read within the stretches before the end, nor any byte outside the buffer; both
// for a DMA (each stretch through a slot, streamed out) and for the CPU (under the streaming size:
// each stretch read straight into the buffer).
class HostCopierReads : public testing::TestWithParam<HostCopier::ReadFor> {};

TEST_P(HostCopierReads, ReturnWhatOnePreadWould) {
  install_cmt_handler();  // a read may stream into the buffer under a fault guard
  const HostCopier::ReadFor next = GetParam();
  HostCopier copier(host_config(HostCopy::All), 3, {});
  const std::size_t size = (5u << 20) + 12345;
  PatternFile file(size);
  ASSERT_GE(file.fd, 0);
  std::vector<unsigned char> dst(size + 8192), want(size + 8192);
  struct Case {
    std::size_t bytes;
    off_t offset;
  };
  const Case cases[] = {{1, 0},           {4097, 3},          {(1u << 20) + 3, 4095},
                        {size, 0},        {size + 5000, 0},   {(2u << 20) + 1, static_cast<off_t>(size - 70000)},
                        {1u << 20, static_cast<off_t>(size)}, {1u << 20, static_cast<off_t>(size + 99)}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "bytes=" << c.bytes << " offset=" << c.offset);
    std::fill(dst.begin(), dst.end(), 0xEE);
    std::fill(want.begin(), want.end(), 0xEE);
    const ssize_t libc = pread(file.fd, want.data() + 1, c.bytes, c.offset);
    const HostCopier::ReadResult r =
        copier.read_file(file.fd, dst.data() + 1, c.bytes, c.offset, next);
    ASSERT_TRUE(r.taken);
    EXPECT_EQ(r.error, 0);
    ASSERT_EQ(static_cast<ssize_t>(r.bytes), libc);
    EXPECT_EQ(std::memcmp(dst.data(), want.data(), dst.size()), 0);
  }
  std::vector<unsigned char> buf(1u << 20);
  HostCopier::ReadResult r = copier.read_file(-1, buf.data(), buf.size(), 0, next);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_EQ(r.error, EBADF);
  const int dir = open("/tmp", O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  r = copier.read_file(dir, buf.data(), buf.size(), 0, next);
  close(dir);
  EXPECT_EQ(r.error, EISDIR);
  // The buffer's second half unmapped: the first stretches are read, the call says how many bytes.
  const std::size_t page = 4096, half = 1u << 20;
  auto* map = static_cast<unsigned char*>(
      mmap(nullptr, 2 * half, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(map, MAP_FAILED);
  munmap(map + half, half);
  r = copier.read_file(file.fd, map + page, 2 * half - page, 0, next);
  EXPECT_EQ(r.error, EFAULT);
  EXPECT_GT(r.bytes, 0u);
  EXPECT_LE(r.bytes, half - page);
  EXPECT_EQ(std::memcmp(map + page, file.bytes.data(), r.bytes), 0);
  munmap(map, half);
  EXPECT_EQ(copier.counts().read_calls, std::size(cases) + 3);
  // Through the slots for a DMA; for the CPU, under the streaming size, straight into the buffer.
  if (next == HostCopier::ReadFor::Dma)
    EXPECT_EQ(copier.counts().read_streamed_bytes, copier.counts().read_bytes);
  else
    EXPECT_EQ(copier.counts().read_streamed_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(ForEachReader, HostCopierReads,
                         testing::Values(HostCopier::ReadFor::Dma, HostCopier::ReadFor::Cpu),
                         [](const testing::TestParamInfo<HostCopier::ReadFor>& info) {
                           return info.param == HostCopier::ReadFor::Dma ? "Dma" : "Cpu";
                         });

// A read into a new buffer (torch.load reads each storage into one) has its pages made first, as a
// fresh copy destination's: the bytes are the file's, the rest of the buffer past the file's end
// still zero, and the prepared blocks counted.
TEST(HostCopier, AReadIntoANewBufferPreparesItsPagesAndReadsRight) {
  HostCopier copier(host_config(HostCopy::All), 3, {});
  const std::size_t size = (12u << 20) + 777;
  PatternFile file(size);
  ASSERT_GE(file.fd, 0);
  const std::size_t n = 20u << 20;  // more than the file holds past the offset: the read is short
  auto* map = static_cast<unsigned char*>(
      mmap(nullptr, n + 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(map, MAP_FAILED);
  const off_t offset = 4097;
  const HostCopier::ReadResult r =
      copier.read_file(file.fd, map + 16, n, offset, HostCopier::ReadFor::Cpu);
  ASSERT_TRUE(r.taken);
  EXPECT_EQ(r.error, 0);
  ASSERT_EQ(r.bytes, size - static_cast<std::size_t>(offset));
  EXPECT_EQ(std::memcmp(map + 16, file.bytes.data() + offset, r.bytes), 0);
  EXPECT_EQ(copier.counts().read_streamed_bytes, n);  // too large to stay cached: streamed
  EXPECT_EQ(std::count(map, map + 16, 0), 16);
  EXPECT_EQ(std::count(map + 16 + r.bytes, map + n + 8192, 0),
            static_cast<long>(n + 8192 - 16 - r.bytes));
  if (can_populate()) {
    EXPECT_GE(copier.counts().read_fresh_bytes, 8u * kFreshBlock);
  }
  // Written once, the buffer is no longer fresh: a second read prepares nothing more.
  const std::uint64_t prepared = copier.counts().read_fresh_bytes;
  ASSERT_EQ(copier.read_file(file.fd, map + 16, n, 0, HostCopier::ReadFor::Cpu).bytes, size);
  EXPECT_EQ(std::memcmp(map + 16, file.bytes.data(), size), 0);
  EXPECT_EQ(copier.counts().read_fresh_bytes, prepared);
  munmap(map, n + 8192);
}

// A new buffer with a page in its middle that cannot be written: the read returns what one pread
// returns (the bytes before the page; the kernel's EFAULT only where nothing was read), whatever
// preparing its pages ran into, and writes nothing past it that the file does not hold there.
TEST(HostCopier, AReadIntoANewBufferWithAHoleReadsUpToTheHole) {
  install_cmt_handler();  // a read may stream into the buffer under a fault guard
  HostCopier copier(host_config(HostCopy::All), 3, {});
  const std::size_t size = 24u << 20;
  PatternFile file(size);
  ASSERT_GE(file.fd, 0);
  auto* map = static_cast<unsigned char*>(
      mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(map, MAP_FAILED);
  const std::size_t hole = (13u << 20) + 4096;
  ASSERT_EQ(mprotect(map + hole, 4096, PROT_READ), 0);
  const HostCopier::ReadResult r =
      copier.read_file(file.fd, map, size, 0, HostCopier::ReadFor::Cpu);
  ASSERT_TRUE(r.taken);
  std::vector<unsigned char> want(size);
  const ssize_t libc = pread(file.fd, want.data(), size, 0);
  ASSERT_EQ(libc, static_cast<ssize_t>(size));
  EXPECT_EQ(r.error, EFAULT);
  EXPECT_LE(r.bytes, hole);
  EXPECT_GT(r.bytes, 0u);
  EXPECT_EQ(std::memcmp(map, file.bytes.data(), r.bytes), 0);
  // Bytes past the hole are the file's (a stretch after it read) or still zero: never others.
  for (std::size_t i = hole + 4096; i < size; i += 4099)
    ASSERT_TRUE(map[i] == 0 || map[i] == file.bytes[i]) << i;
  EXPECT_EQ(map[hole], 0);
  munmap(map, size);
}

// Two reads at once: one is read on the threads, the other declined (it touched nothing).
TEST(HostCopier, AReadWhileTheThreadsAreHeldIsDeclined) {
  HostCopier copier(host_config(HostCopy::All), 2, {});
  const std::size_t size = 16u << 20;
  PatternFile file(size);
  ASSERT_GE(file.fd, 0);
  std::atomic<int> declined{0}, wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      std::vector<unsigned char> dst(size, 0xEE);
      for (int i = 0; i < 20; ++i) {
        const HostCopier::ReadResult r =
            copier.read_file(file.fd, dst.data(), size, 0, HostCopier::ReadFor::Dma);
        if (!r.taken) {
          ++declined;
          if (std::count(dst.begin(), dst.end(), 0xEE) != static_cast<long>(size)) ++wrong;
          continue;
        }
        if (r.bytes != size || std::memcmp(dst.data(), file.bytes.data(), size) != 0) ++wrong;
        std::fill(dst.begin(), dst.end(), 0xEE);
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(copier.counts().read_calls + declined.load(), 80u);
}

// File reads the host leg takes: regular files read into CUDA host memory, from rules::
// kFileReadFrom up, as read (the descriptor's offset moved as one read moves it) or pread; the
// rest is libc's.
TEST(HostLeg, TakesFileReadsIntoCudaHostMemoryOnly) {
  const std::size_t size = (3u << 20) + 777;
  PatternFile file(size);
  ASSERT_GE(file.fd, 0);
  HostCopier copier(host_config(HostCopy::Pinned), 2, {});
  HostMemoryMap map;
  HostLeg leg(&map);
  std::vector<unsigned char> pinned(2u << 20), plain(2u << 20);
  const std::size_t n = 1u << 20;
  EXPECT_FALSE(leg.take_read(file.fd, pinned.data(), n, 0).taken) << "not armed";
  leg.arm(copier, pinned_reads_config());
  ASSERT_TRUE(map.add(pinned.data(), pinned.size()));
  EXPECT_FALSE(leg.take_read(file.fd, plain.data(), n, 0).taken) << "not CUDA host memory";
  EXPECT_FALSE(leg.take_read(file.fd, pinned.data(), rules::kFileReadFrom - 1, 0).taken);
  // pread: at its offset, the descriptor's untouched.
  ASSERT_EQ(lseek(file.fd, 100, SEEK_SET), 100);
  HostLeg::ReadTaken r = leg.take_read(file.fd, pinned.data(), n, 5000);
  ASSERT_TRUE(r.taken);
  EXPECT_EQ(r.result, static_cast<long>(n));
  EXPECT_EQ(std::memcmp(pinned.data(), file.bytes.data() + 5000, n), 0);
  EXPECT_EQ(lseek(file.fd, 0, SEEK_CUR), 100);
  // read: from the descriptor's offset, which moves past the bytes read; short at the end of the
  // file, then 0.
  r = leg.take_read(file.fd, pinned.data(), n, -1);
  ASSERT_TRUE(r.taken);
  EXPECT_EQ(r.result, static_cast<long>(n));
  EXPECT_EQ(std::memcmp(pinned.data(), file.bytes.data() + 100, n), 0);
  EXPECT_EQ(lseek(file.fd, 0, SEEK_CUR), static_cast<off_t>(100 + n));
  ASSERT_EQ(lseek(file.fd, static_cast<off_t>(size - 4000), SEEK_SET),
            static_cast<off_t>(size - 4000));
  r = leg.take_read(file.fd, pinned.data(), n, -1);
  EXPECT_EQ(r.result, 4000);
  EXPECT_EQ(std::memcmp(pinned.data(), file.bytes.data() + size - 4000, 4000), 0);
  EXPECT_EQ(lseek(file.fd, 0, SEEK_CUR), static_cast<off_t>(size));
  r = leg.take_read(file.fd, pinned.data(), n, -1);
  EXPECT_TRUE(r.taken);
  EXPECT_EQ(r.result, 0);
  // Not regular files, or not open for reading: libc's, which says what is wrong.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_FALSE(leg.take_read(pipe_fds[0], pinned.data(), n, -1).taken);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  char name[] = "/tmp/cmt-wronly-XXXXXX";
  const int wronly = mkstemp(name);
  ASSERT_GE(wronly, 0);
  const int w = open(name, O_WRONLY);
  unlink(name);
  close(wronly);
  ASSERT_GE(w, 0);
  EXPECT_FALSE(leg.take_read(w, pinned.data(), n, 0).taken);
  close(w);
  EXPECT_FALSE(leg.take_read(-1, pinned.data(), n, 0).taken);
  leg.disarm();
  EXPECT_FALSE(leg.take_read(file.fd, pinned.data(), n, 0).taken) << "disarmed";
  // Read for a DMA: through the slots, streamed into the buffer.
  const std::uint64_t streamed = copier.counts().read_streamed_bytes;
  EXPECT_GE(streamed, 4 * n);
  // host_copy = all: reads into any memory, and readv's segments in it, on the threads.
  HostLeg all(&map);
  all.arm(copier, host_config(HostCopy::All));
  std::fill(plain.begin(), plain.end(), 0xEE);
  r = all.take_read(file.fd, plain.data(), n, 777);
  ASSERT_TRUE(r.taken);
  EXPECT_EQ(r.result, static_cast<long>(n));
  EXPECT_EQ(std::memcmp(plain.data(), file.bytes.data() + 777, n), 0);
  iovec seg{plain.data(), n};
  r = all.take_readv(file.fd, &seg, 1, 4096);
  ASSERT_TRUE(r.taken);
  EXPECT_EQ(r.result, static_cast<long>(n));
  EXPECT_EQ(std::memcmp(plain.data(), file.bytes.data() + 4096, n), 0);
  EXPECT_FALSE(all.take_read(file.fd, plain.data(), rules::kFileReadFrom - 1, 0).taken);
  // host_reads = all (the built-in choice): reads into any memory, of a file in the page cache.
  HostLeg reads_all(&map);
  Config reads = host_config(HostCopy::Pinned);
  reads.host_reads = HostReads::All;
  reads_all.arm(copier, reads);
  r = reads_all.take_read(file.fd, plain.data(), n, 99);
  ASSERT_TRUE(r.taken);
  EXPECT_EQ(r.result, static_cast<long>(n));
  EXPECT_EQ(std::memcmp(plain.data(), file.bytes.data() + 99, n), 0);
  // Read for the program's code, under the streaming size: straight into the buffer, its lines
  // left in the caches as libc's read leaves them.
  EXPECT_EQ(copier.counts().read_streamed_bytes, streamed);
  // Its pages dropped from the cache: a read into ordinary memory is libc's (sequential, with the
  // kernel's read-ahead), one into CUDA host memory still the threads'. Dropped before each call:
  // the probe's RWF_NOWAIT read starts the kernel's read-ahead there as it says no, so the pages
  // come back soon after (asked with mincore, which starts nothing).
  // The first page read (blocking) before the drops: a read the probe started as it said no is
  // then over. A page still being read is locked, which the drop skips, and reads as absent to
  // mincore, so it came back after the check (CI under AddressSanitizer saw it twice, 2026-12-05
  // and 06). Dropped twice, 2 ms apart, for a read-ahead of the threads' preads still in flight.
  const auto dropped = [&] {
    char first[4096];
    if (pread(file.fd, first, sizeof first, 0) < 0) return false;
    if (fdatasync(file.fd) != 0 || posix_fadvise(file.fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (posix_fadvise(file.fd, 0, 0, POSIX_FADV_DONTNEED) != 0) return false;
    void* m = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, file.fd, 0);
    if (m == MAP_FAILED) return false;
    unsigned char in_core = 1;
    const bool gone = mincore(m, 4096, &in_core) == 0 && !(in_core & 1);
    munmap(m, 4096);
    return gone;
  };
  if (!dropped()) GTEST_SKIP() << "pages not dropped here";
  EXPECT_FALSE(reads_all.take_read(file.fd, plain.data(), n, 0).taken) << "not in the cache";
  ASSERT_TRUE(dropped());
  ASSERT_EQ(lseek(file.fd, 0, SEEK_SET), 0);
  EXPECT_FALSE(reads_all.take_read(file.fd, plain.data(), n, -1).taken);
  EXPECT_EQ(lseek(file.fd, 0, SEEK_CUR), 0) << "a read left to libc moved the offset";
  ASSERT_TRUE(dropped());
  EXPECT_FALSE(reads_all.take_readv(file.fd, &seg, 1, 0).taken);
  ASSERT_TRUE(dropped());
  r = reads_all.take_read(file.fd, pinned.data(), n, 0);
  ASSERT_TRUE(r.taken);
  EXPECT_EQ(std::memcmp(pinned.data(), file.bytes.data(), n), 0);
  // Read once, its first pages are in the cache again.
  EXPECT_TRUE(reads_all.take_read(file.fd, plain.data(), n, 0).taken);
}

// readv and preadv: taken when a segment of the threshold or more lies in CUDA host memory, every
// segment then read in order at its place in the file (the others with pread), the result what
// one readv returns: short at the end of the file, partial where a later segment cannot be
// written, the descriptor's offset moved by readv alone.
TEST(HostLeg, TakesReadvWithASegmentInCudaHostMemory) {
  const std::size_t size = (3u << 20) + 777;
  PatternFile file(size);
  ASSERT_GE(file.fd, 0);
  HostCopier copier(host_config(HostCopy::Pinned), 2, {});
  HostMemoryMap map;
  HostLeg leg(&map);
  std::vector<unsigned char> pinned(2u << 20, 0xEE), plain(1u << 20, 0xEE);
  leg.arm(copier, pinned_reads_config());
  ASSERT_TRUE(map.add(pinned.data(), pinned.size()));
  // plain 1000 bytes, pinned 1 MiB, plain 300 KiB, pinned 700 KiB.
  iovec segs[] = {{plain.data(), 1000},
                  {pinned.data(), 1u << 20},
                  {plain.data() + 4096, 300u << 10},
                  {pinned.data() + (1u << 20), 700u << 10}};
  std::size_t total = 0;
  for (const iovec& v : segs) total += v.iov_len;
  auto matches = [&](off_t at, std::size_t bytes) {  // the segments hold the file's bytes from at
    std::size_t done = 0;
    for (const iovec& v : segs) {
      const std::size_t n = std::min(v.iov_len, bytes - done);
      if (std::memcmp(v.iov_base, file.bytes.data() + at + done, n) != 0) return false;
      done += n;
    }
    return true;
  };
  const std::uint64_t reads_before = copier.counts().read_calls;
  ASSERT_EQ(lseek(file.fd, 100, SEEK_SET), 100);
  HostLeg::ReadTaken r = leg.take_readv(file.fd, segs, 4, 5000);  // preadv
  ASSERT_TRUE(r.taken);
  EXPECT_EQ(r.result, static_cast<long>(total));
  EXPECT_TRUE(matches(5000, total));
  EXPECT_EQ(lseek(file.fd, 0, SEEK_CUR), 100) << "preadv moved the offset";
  EXPECT_EQ(copier.counts().read_calls, reads_before + 2) << "the pinned segments, on the threads";
  r = leg.take_readv(file.fd, segs, 4, -1);  // readv
  ASSERT_TRUE(r.taken);
  EXPECT_EQ(r.result, static_cast<long>(total));
  EXPECT_TRUE(matches(100, total));
  EXPECT_EQ(lseek(file.fd, 0, SEEK_CUR), static_cast<off_t>(100 + total));
  // Near the end: short, the offset at the end; then 0.
  const off_t near = static_cast<off_t>(size - (1u << 20) - 5000);
  ASSERT_EQ(lseek(file.fd, near, SEEK_SET), near);
  r = leg.take_readv(file.fd, segs, 4, -1);
  EXPECT_EQ(r.result, static_cast<long>((1u << 20) + 5000));
  EXPECT_TRUE(matches(near, (1u << 20) + 5000));
  EXPECT_EQ(lseek(file.fd, 0, SEEK_CUR), static_cast<off_t>(size));
  r = leg.take_readv(file.fd, segs, 4, -1);
  EXPECT_TRUE(r.taken);
  EXPECT_EQ(r.result, 0);
  // A segment the kernel cannot write after one it can: the bytes before it, as the kernel's
  // readv returns them; first: -1 and EFAULT.
  void* hole = mmap(nullptr, 1u << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  iovec bad[] = {{pinned.data(), 1u << 20}, {hole, 4096}};
  r = leg.take_readv(file.fd, bad, 2, 0);
  EXPECT_EQ(r.result, static_cast<long>(1u << 20));
  iovec bad_first[] = {{hole, 4096}, {pinned.data(), 1u << 20}};
  r = leg.take_readv(file.fd, bad_first, 2, 0);
  EXPECT_TRUE(r.taken);
  EXPECT_EQ(r.result, -1);
  EXPECT_EQ(r.error, EFAULT);
  // Declined, for libc: no large segment in CUDA host memory, a list the kernel cannot read,
  // too many segments, a pipe.
  iovec small[] = {{pinned.data(), rules::kFileReadFrom - 1}, {plain.data(), 1u << 20}};
  EXPECT_FALSE(leg.take_readv(file.fd, small, 2, 0).taken);
  EXPECT_FALSE(leg.take_readv(file.fd, static_cast<const iovec*>(hole), 2, 0).taken);
  std::vector<iovec> many(rules::kMostReadSegments + 1, iovec{pinned.data(), 1u << 20});
  EXPECT_FALSE(leg.take_readv(file.fd, many.data(), static_cast<int>(many.size()), 0).taken);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_FALSE(leg.take_readv(pipe_fds[0], segs, 4, -1).taken);
  // The pipe's number made a file: left to libc for kNotFileCalls more calls, then taken.
  ASSERT_EQ(dup2(file.fd, pipe_fds[0]), pipe_fds[0]);
  unsigned declined = 0;
  while (declined <= HostLeg::kNotFileCalls && !leg.take_readv(pipe_fds[0], segs, 4, 0).taken)
    ++declined;
  EXPECT_EQ(declined, HostLeg::kNotFileCalls);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  munmap(hole, 1u << 20);
  leg.disarm();
  EXPECT_FALSE(leg.take_readv(file.fd, segs, 4, 0).taken) << "disarmed";
}

// Several threads reading one descriptor with read() or readv() at once, as the kernel serializes
// them: each call gets bytes of its own, the next after the offset the last one left, so together
// they read the file exactly once. Those the leg takes (one at a time: the others find the threads
// held) must keep that, beside the ones libc makes meanwhile.
TEST(HostLeg, ReadsOfOneDescriptorFromSeveralThreadsEachGetBytesOfTheirOwn) {
  // Each 8-byte word of the file is its own index, so a read's first word says where it read.
  const std::size_t words = (48u << 20) / 8 + 11;
  std::vector<std::uint64_t> index(words);
  for (std::size_t i = 0; i < words; ++i) index[i] = i;
  char name[] = "/tmp/cmt-read-shared-XXXXXX";
  const int w = mkstemp(name);
  ASSERT_GE(w, 0);
  const std::size_t size = words * 8;
  const bool written = write(w, index.data(), size) == static_cast<ssize_t>(size);
  close(w);
  ASSERT_TRUE(written);
  HostCopier copier(host_config(HostCopy::All), 2, {});
  HostMemoryMap map;
  HostLeg leg(&map);
  leg.arm(copier, host_config(HostCopy::All));
  for (int round = 0; round < 3; ++round) {
    const int shared = open(name, O_RDONLY);  // a new description: its offset at 0
    ASSERT_GE(shared, 0);
    struct Got {
      std::uint64_t first;
      std::size_t bytes;
    };
    std::vector<std::vector<Got>> got(4);
    std::atomic<int> wrong{0}, taken{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t)
      readers.emplace_back([&, t] {
        const std::size_t n = (1u << 20) + 8 * 37 * static_cast<std::size_t>(t + 1);
        std::vector<std::uint64_t> buf(n / 8 + 1);
        for (;;) {
          HostLeg::ReadTaken r;
          iovec seg{buf.data(), n};
          r = t % 2 ? leg.take_readv(shared, &seg, 1, -1) : leg.take_read(shared, buf.data(), n, -1);
          long bytes = r.result;
          if (r.taken)
            ++taken;
          else
            bytes = t % 2 ? readv(shared, &seg, 1) : read(shared, buf.data(), n);
          if (bytes <= 0) break;
          const std::size_t k = static_cast<std::size_t>(bytes) / 8;
          for (std::size_t i = 1; i < k; ++i)
            if (buf[i] != buf[0] + i) {
              ++wrong;
              break;
            }
          got[static_cast<std::size_t>(t)].push_back({buf[0], static_cast<std::size_t>(bytes)});
        }
      });
    for (auto& r : readers) r.join();
    close(shared);
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_GT(taken.load(), 0) << "the leg took none of the reads";
    std::vector<Got> all;
    for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
    std::sort(all.begin(), all.end(), [](const Got& a, const Got& b) { return a.first < b.first; });
    std::size_t at = 0, overlaps = 0, gaps = 0;
    for (const Got& g : all) {
      const std::size_t from = g.first * 8;
      if (from < at) ++overlaps;
      if (from > at) ++gaps;
      at = std::max(at, from + g.bytes);
    }
    EXPECT_EQ(overlaps, 0u) << "bytes read twice, round " << round;
    EXPECT_EQ(gaps, 0u) << "bytes never read, round " << round;
    EXPECT_EQ(at, size);
  }
  unlink(name);
}

// A read() whose buffer cannot be written past some point: the bytes before it, and the offset
// moved past them alone, as the kernel's read leaves it; where nothing can be written, -1 and
// EFAULT with the offset where it was (the claimed bytes given back).
TEST(HostLeg, AReadThatFaultsMovesTheOffsetPastWhatItReadAlone) {
  install_cmt_handler();  // a read may stream into the buffer under a fault guard
  const std::size_t size = 4u << 20, half = 1u << 20, page = 4096;
  PatternFile file(size);
  ASSERT_GE(file.fd, 0);
  HostCopier copier(host_config(HostCopy::All), 2, {});
  HostMemoryMap map;
  HostLeg leg(&map);
  leg.arm(copier, host_config(HostCopy::All));
  auto* buf = static_cast<unsigned char*>(
      mmap(nullptr, 2 * half, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(buf, MAP_FAILED);
  munmap(buf + half, half);
  ASSERT_EQ(lseek(file.fd, 1000, SEEK_SET), 1000);
  HostLeg::ReadTaken r = leg.take_read(file.fd, buf + page, 2 * half - page, -1);
  ASSERT_TRUE(r.taken);
  ASSERT_GT(r.result, 0);
  EXPECT_LE(r.result, static_cast<long>(half - page));
  EXPECT_EQ(std::memcmp(buf + page, file.bytes.data() + 1000, static_cast<std::size_t>(r.result)), 0);
  EXPECT_EQ(lseek(file.fd, 0, SEEK_CUR), 1000 + r.result);
  const off_t before = lseek(file.fd, 0, SEEK_CUR);
  iovec seg{buf + half, half};  // nothing mapped there
  r = leg.take_readv(file.fd, &seg, 1, -1);
  EXPECT_TRUE(r.taken);
  EXPECT_EQ(r.result, -1);
  EXPECT_EQ(r.error, EFAULT);
  EXPECT_EQ(lseek(file.fd, 0, SEEK_CUR), before);
  r = leg.take_read(file.fd, buf + half, half, -1);
  EXPECT_TRUE(r.taken);
  EXPECT_EQ(r.result, -1);
  EXPECT_EQ(r.error, EFAULT);
  EXPECT_EQ(lseek(file.fd, 0, SEEK_CUR), before);
  munmap(buf, half);
}

// A file that says it holds nothing (procfs, and other files the kernel makes as they are read,
// whose reads at an offset are made afresh) is libc's, whatever the read's size: stretches read
// apart could join two versions of it.
TEST(HostLeg, LeavesFilesThatHaveNoSizeToLibc) {
  HostCopier copier(host_config(HostCopy::All), 2, {});
  HostMemoryMap map;
  HostLeg leg(&map);
  leg.arm(copier, host_config(HostCopy::All));
  std::vector<unsigned char> buf(2u << 20);
  // On a thread of its own: a readv that finds a descriptor no file leaves the thread a note of it
  // (HostLeg::kNotFileCalls), and the descriptor's number, closed here, is the next file's in the
  // tests that follow in this process (run in one process, shuffled, they failed so).
  std::thread([&] {
    const int maps = open("/proc/self/maps", O_RDONLY);
    ASSERT_GE(maps, 0);
    EXPECT_FALSE(leg.take_read(maps, buf.data(), 1u << 20, -1).taken);
    EXPECT_FALSE(leg.take_read(maps, buf.data(), 1u << 20, 0).taken);
    iovec seg{buf.data(), 1u << 20};
    EXPECT_FALSE(leg.take_readv(maps, &seg, 1, -1).taken);
    close(maps);
  }).join();
  // An empty regular file too (nothing to gain), at any offset.
  char name[] = "/tmp/cmt-empty-XXXXXX";
  const int empty = mkstemp(name);
  ASSERT_GE(empty, 0);
  unlink(name);
  EXPECT_FALSE(leg.take_read(empty, buf.data(), 1u << 20, -1).taken);
  close(empty);
  EXPECT_EQ(copier.counts().read_calls, 0u);
}

// What kNotFileCalls trades (host_leg.h): a descriptor a thread's readv found to be no file,
// closed and opened again as a file, is left to libc by that thread's next readv calls on it,
// and read right by libc; once the note runs out, the threads take it again.
TEST(HostLeg, ADescriptorReopenedAsAFileIsLeftToLibcUntilItsNoteRunsOut) {
  const std::size_t size = (2u << 20) + 333;
  HostCopier copier(host_config(HostCopy::All), 2, {});
  HostMemoryMap map;
  HostLeg leg(&map);
  leg.arm(copier, host_config(HostCopy::All));
  std::vector<unsigned char> buf(1u << 20);
  iovec seg{buf.data(), buf.size()};
  std::thread([&] {
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    EXPECT_FALSE(leg.take_readv(pipe_fds[0], &seg, 1, -1).taken);
    const int number = pipe_fds[0];
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    PatternFile file(size);
    ASSERT_GE(file.fd, 0);
    ASSERT_EQ(dup2(file.fd, number), number);  // the file, under the pipe's number
    for (unsigned i = 0; i < HostLeg::kNotFileCalls; ++i)
      ASSERT_FALSE(leg.take_readv(number, &seg, 1, 0).taken) << "call " << i;
    EXPECT_EQ(copier.counts().read_calls, 0u);
    const HostLeg::ReadTaken r = leg.take_readv(number, &seg, 1, 4096);
    ASSERT_TRUE(r.taken);
    EXPECT_EQ(r.result, static_cast<long>(buf.size()));
    EXPECT_EQ(std::memcmp(buf.data(), file.bytes.data() + 4096, buf.size()), 0);
    if (number != file.fd) close(number);  // the file's own descriptor is closed with it
  }).join();
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

// Under host_copy_threshold, a copy from rules::kUnmappedCopyFrom up is taken only where it fills
// CUDA host memory from pages not mapped in yet (safetensors' load_file copying a tensor from a
// fresh file mapping into its pinned buffer): byte-exact at an odd size and offset; the same
// source once mapped in, a resident source, an unmapped one into pageable memory, and one under
// kUnmappedCopyFrom are libc's. Both host_copy modes that take copies do the same.
TEST(HostLeg, TakesSmallerCopiesIntoCudaHostMemoryFromPagesNotMappedInYet) {
  const std::size_t file_bytes = 8u << 20, n = (1u << 20) + 4321;
  PatternFile file(file_bytes);
  ASSERT_GE(file.fd, 0);
  for (HostCopy mode : {HostCopy::Pinned, HostCopy::All}) {
    Config c = host_config(mode);
    c.host_copy_threshold = 4u << 20;
    HostCopier copier(c, 2, {});
    HostMemoryMap map;
    HostLeg leg(&map);
    leg.arm(copier, c);
    EXPECT_EQ(leg.copy_gate().load(), rules::kUnmappedCopyFrom);
    std::vector<unsigned char> pinned(4u << 20, 0), pageable(4u << 20, 0);
    map.add(pinned.data(), pinned.size());
    auto* mapped = static_cast<unsigned char*>(
        mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, file.fd, 0));  // no page touched yet
    ASSERT_NE(mapped, MAP_FAILED);
    const std::size_t at = (1u << 20) + 77;
    ASSERT_EQ(leg.take_copy(pinned.data() + 3, mapped + at, n), n);
    EXPECT_EQ(std::memcmp(pinned.data() + 3, file.bytes.data() + at, n), 0);
    EXPECT_EQ(pinned[2], 0);
    EXPECT_EQ(pinned[3 + n], 0);
    EXPECT_EQ(leg.unmapped_copies(), 1u);
    // Mapped in now: libc's, as every copy under the threshold from resident memory.
    EXPECT_EQ(leg.take_copy(pinned.data(), mapped + at, n), 0u);
    EXPECT_EQ(leg.take_copy(pinned.data(), pageable.data(), n), 0u);
    // Not into CUDA host memory, or under kUnmappedCopyFrom: libc's, pages unmapped or not.
    const std::size_t fresh_at = 5u << 20;
    EXPECT_EQ(leg.take_copy(pageable.data(), mapped + fresh_at, n), 0u);
    EXPECT_EQ(leg.take_copy(pinned.data(), mapped + fresh_at, rules::kUnmappedCopyFrom - 1), 0u);
    // The copy that empties CUDA host memory into the unmapped pages is no such copy (its source
    // is resident); the mapping is read-only anyway.
    EXPECT_EQ(leg.unmapped_copies(), 1u);
    EXPECT_EQ(copier.counts().calls, 1u);
    // At the threshold the old rule stands: taken whatever the pages.
    if (mode == HostCopy::All) {
      std::vector<unsigned char> big(4u << 20, 9);
      EXPECT_EQ(leg.take_copy(pageable.data(), big.data(), big.size()), big.size());
    }
    leg.disarm();
    EXPECT_EQ(leg.copy_gate().load(), HostLeg::kNever);
    munmap(mapped, file_bytes);
  }
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
