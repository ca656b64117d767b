// cmt-lab-fault-cost (lab, CPU only): what a page fault on a fresh mapping of a file in the page
// cache costs on this machine, taken by touching the pages (as a copy from the mapping takes
// them) or asked for with MADV_POPULATE_READ (Linux 5.14), which maps the same pages without an
// exception each, and what the first read of a page mapped already costs. Issue 32's loads copy
// from fresh file mappings. On the 2-core development VM (a Firecracker VM like the GPU
// machines'; session 33, lab/NOTES.md 76) populating cost a twentieth of touching, but a copy
// from the populated mapping cost as much as one that faulted: the price is the first read of
// each page, whoever maps it (anonymous memory too: 1.5 ms a MiB at the first read, 0.08 at the
// second). Run it on a GPU machine before building on populated sources there.
//
// For a file of --bytes (64 MiB) in the page cache, mapped afresh for each measurement, ms per MiB
// (median of --reps) on --threads threads, each taking pieces of --piece bytes in turn:
//   touch       one byte read per page (the faults alone)
//   populate    MADV_POPULATE_READ of each piece (the same faults without the exceptions)
//   copy        memcpy of each piece into a buffer of the thread's (a copy from a fresh mapping)
//   pop+copy    MADV_POPULATE_READ of each piece, then its memcpy
//   mapped      memcpy of each piece once the whole mapping is populated (the copy alone)
//   anon-1st    memcpy of each piece of new anonymous memory, populated (MADV_POPULATE_WRITE:
//               the kernel has zeroed every page) but not yet read by the process
//   anon-2nd    the same memory copied again (every page read once before)
//   pread       pread of each piece from the file (the page cache read without mapping it: what a
//               copy from a shared file mapping could do instead; session 41, issue 32)
//
// With --ring BYTES the pieces land in one buffer of that size shared by the threads, piece i at
// slot i (as cmt's staging ring takes them) instead of one buffer a thread that stays in its cache.
//
// usage: cmt-lab-fault-cost [--bytes 64M] [--piece 1M] [--threads 1,2] [--reps 5] [--dir /var/tmp]
//                           [--ring 0]
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "page_cache_file.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

using Clock = std::chrono::steady_clock;
enum class Mode { Touch, Populate, Copy, PopulateCopy, Mapped, AnonFirst, AnonSecond, Pread };
const char* const kNames[] = {"touch",  "populate", "copy",     "pop+copy",
                              "mapped", "anon-1st", "anon-2nd", "pread"};
constexpr int kModes = 8;

void populate(const char* p, std::size_t n) {
  madvise(const_cast<char*>(p), n, MADV_POPULATE_READ);  // a refusal leaves the faults to the copy
}

// One pass over a fresh mapping of `fd` in `mode`: seconds.
double one_pass(int fd, std::size_t bytes, std::size_t piece, int threads, Mode mode,
                std::vector<char>& ring) {
  const bool anon = mode == Mode::AnonFirst || mode == Mode::AnonSecond;
  char* m = static_cast<char*>(anon ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                    : mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0));
  if (m == MAP_FAILED) return -1;
  if (mode == Mode::Mapped) populate(m, bytes);
  if (anon) madvise(m, bytes, MADV_POPULATE_WRITE);
  if (mode == Mode::AnonSecond) {
    std::vector<char> buf(piece);
    for (std::size_t at = 0; at < bytes; at += piece) std::memcpy(buf.data(), m + at, piece);
    std::printf("%s", buf[0] == 1 ? "?" : "");  // keeps the pass
  }
  const std::size_t pieces = bytes / piece;
  std::atomic<std::size_t> next{0};
  std::atomic<unsigned long> sink{0};
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      std::vector<char> own(ring.empty() ? piece : 0);
      const std::size_t slots = ring.size() / piece;
      unsigned long sum = 0;
      for (std::size_t i; (i = next.fetch_add(1)) < pieces;) {
        const char* p = m + i * piece;
        char* buf = ring.empty() ? own.data() : ring.data() + (i % slots) * piece;
        if (mode == Mode::Pread) {
          if (pread(fd, buf, piece, static_cast<off_t>(i * piece)) != static_cast<ssize_t>(piece))
            sum += 1u << 30;  // shows as a wrong sum; never expected for a file in the cache
          sum += static_cast<unsigned char>(buf[i % piece]);
          continue;
        }
        if (mode == Mode::Touch) {
          for (std::size_t at = 0; at < piece; at += 4096) sum += static_cast<unsigned char>(p[at]);
          continue;
        }
        if (mode == Mode::Populate || mode == Mode::PopulateCopy) populate(p, piece);
        if (mode != Mode::Populate) std::memcpy(buf, p, piece);
        sum += static_cast<unsigned char>(buf[i % piece]);
      }
      sink += sum;
    });
  }
  for (std::thread& th : pool) th.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  munmap(m, bytes);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t bytes = 64u << 20, piece = 1u << 20, ring_bytes = 0;
  std::vector<int> thread_counts = {1, 2};
  int reps = 5;
  std::string dir = "/var/tmp";
  CLI::App app{"What a fault on a fresh file mapping costs, touched or populated",
               "cmt-lab-fault-cost"};
  cmt::bench::add_size(app, "--bytes", &bytes, "The file's size");
  cmt::bench::add_size(app, "--piece", &piece, "Each thread's piece");
  cmt::bench::add_size(app, "--ring", &ring_bytes,
                       "One shared destination of this size (0: each thread's own)");
  app.add_option("--threads", thread_counts, "Thread counts")->delimiter(',');
  app.add_option("--reps", reps, "Repetitions of each")->check(CLI::Range(1, 100));
  app.add_option("--dir", dir, "Where the file goes (not tmpfs, to measure a disk file's cache)");
  if (const int rc = cmt::bench::parse_command_line(app, argc, argv); rc >= 0) return rc;
  piece = std::max<std::size_t>(4096, piece / 4096 * 4096);
  bytes = std::max(piece, bytes / piece * piece);
  const int fd = cmt::bench::page_cache_file(dir, bytes);
  if (fd < 0) {
    std::perror("cmt-lab-fault-cost: the file");
    return 1;
  }
  std::vector<char> ring(ring_bytes ? std::max(piece, ring_bytes / piece * piece) : 0);
  if (!ring.empty()) std::memset(ring.data(), 1, ring.size());  // mapped in before any pass
  std::printf(
      "%zu MiB file in the page cache, pieces of %zu KiB into %s; ms per MiB, median of %d\n",
      bytes >> 20, piece >> 10, ring.empty() ? "each thread's buffer" : "a shared ring", reps);
  for (int threads : thread_counts) {
    std::printf("%2d thread(s):", threads);
    for (int mode = 0; mode < kModes; ++mode) {
      std::vector<double> ms;
      for (int r = 0; r < reps; ++r)
        ms.push_back(one_pass(fd, bytes, piece, threads, static_cast<Mode>(mode), ring) * 1e3 /
                     static_cast<double>(bytes >> 20));
      std::sort(ms.begin(), ms.end());
      std::printf("  %s %.3f", kNames[mode], ms[ms.size() / 2]);
    }
    std::printf("\n");
  }
  return 0;
}
