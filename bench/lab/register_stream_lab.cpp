// cmt-lab-register-stream (lab, GPU): whether a pageable source could go to the GPU without CPU
// staging, registered piece by piece on several threads while the DMA engine copies the pieces
// already registered (issue 32: staging reads every byte and writes it again, so copies from
// several threads at once stop at the host's memcpy bound, about 40 GB/s on the H100 and H200
// machines, where pinned memory reaches 53; registering a page costs no copy of its bytes).
//
// For a source of --bytes (1 GiB), as a fresh read-only mapping of a file in the page cache
// (mapped anew each repetition, as a loader maps a checkpoint) and as resident malloc'd memory,
// and for each piece size and thread count: T threads take pieces in turn and
//   reg      cuMemHostRegister each piece (file: CU_MEMHOSTREGISTER_READ_ONLY), all of them
//   regdma   register each piece, then cuMemcpyHtoDAsync it on the thread's own stream; the time
//            runs until every stream is done (what a copy made this way would take)
//   unreg    cuMemHostUnregister every piece, on the same threads
// GB/s of each (median of --reps), beside a pinned buffer's DMA of the same bytes in the same
// pieces on one stream. The first regdma of each source has its bytes read back and compared.
//
// usage: cmt-lab-register-stream [--bytes 1G] [--pieces 2M,8M,32M] [--threads 1,4,8,16]
//                                [--reps 3] [--dir /tmp]
#include <cuda.h>
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
#include "cuda_check.h"
#include "page_cache_file.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Setup {
  CUcontext ctx = nullptr;
  CUdeviceptr device = 0;
  std::vector<CUstream> streams;  // one per thread
};

// Runs `work(thread, piece)` for every piece on `threads` threads taking pieces in turn.
template <typename Work>
void on_threads(const Setup& s, int threads, std::size_t pieces, Work work) {
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      CMT_CHECK_CU(cuCtxSetCurrent(s.ctx));
      for (std::size_t i; (i = next.fetch_add(1)) < pieces;) work(t, i);
    });
  }
  for (std::thread& th : pool) th.join();
}

struct Times {
  double reg = 0, regdma = 0, unreg = 0;
};

// One repetition over `src` (mapped or resident): registers, then registers and copies, then
// unregisters; returns each phase's seconds.
Times one_rep(const Setup& s, char* src, std::size_t bytes, std::size_t piece, int threads,
              unsigned flags) {
  const std::size_t pieces = (bytes + piece - 1) / piece;
  auto len = [&](std::size_t i) { return std::min(piece, bytes - i * piece); };
  Times t;
  Clock::time_point t0 = Clock::now();
  on_threads(s, threads, pieces, [&](int, std::size_t i) {
    CMT_CHECK_CU(cuMemHostRegister(src + i * piece, len(i), flags));
  });
  t.reg = seconds_since(t0);
  on_threads(s, threads, pieces,
             [&](int, std::size_t i) { CMT_CHECK_CU(cuMemHostUnregister(src + i * piece)); });
  t0 = Clock::now();
  on_threads(s, threads, pieces, [&](int th, std::size_t i) {
    CMT_CHECK_CU(cuMemHostRegister(src + i * piece, len(i), flags));
    CMT_CHECK_CU(cuMemcpyHtoDAsync(s.device + i * piece, src + i * piece, len(i), s.streams[th]));
  });
  for (int th = 0; th < threads; ++th) CMT_CHECK_CU(cuStreamSynchronize(s.streams[th]));
  t.regdma = seconds_since(t0);
  t0 = Clock::now();
  on_threads(s, threads, pieces,
             [&](int, std::size_t i) { CMT_CHECK_CU(cuMemHostUnregister(src + i * piece)); });
  t.unreg = seconds_since(t0);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Whether the device holds `want`'s bytes (read back through a pinned buffer).
bool device_matches(const Setup& s, const char* want, std::size_t bytes) {
  void* back = nullptr;
  CMT_CHECK_CU(cuMemHostAlloc(&back, bytes, 0));
  CMT_CHECK_CU(cuMemcpyDtoH(back, s.device, bytes));
  const bool same = std::memcmp(back, want, bytes) == 0;
  CMT_CHECK_CU(cuMemFreeHost(back));
  return same;
}

double pinned_gbps(const Setup& s, std::size_t bytes, std::size_t piece, int reps) {
  void* pinned = nullptr;
  CMT_CHECK_CU(cuMemHostAlloc(&pinned, bytes, 0));
  std::memset(pinned, 1, bytes);
  std::vector<double> secs;
  for (int r = 0; r < reps; ++r) {
    const Clock::time_point t0 = Clock::now();
    for (std::size_t at = 0; at < bytes; at += piece)
      CMT_CHECK_CU(cuMemcpyHtoDAsync(s.device + at, static_cast<char*>(pinned) + at,
                                     std::min(piece, bytes - at), s.streams[0]));
    CMT_CHECK_CU(cuStreamSynchronize(s.streams[0]));
    secs.push_back(seconds_since(t0));
  }
  CMT_CHECK_CU(cuMemFreeHost(pinned));
  return bytes / median(secs) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t bytes = std::size_t{1} << 30;
  std::vector<std::size_t> pieces = {2 << 20, 8 << 20, 32 << 20};
  std::vector<int> thread_counts = {1, 4, 8, 16};
  int reps = 3;
  std::string dir = "/tmp";
  CLI::App app{"Register pageable memory piece by piece while the DMA copies it",
               "cmt-lab-register-stream"};
  cmt::bench::add_size(app, "--bytes", &bytes, "The source's size");
  cmt::bench::add_sizes(app, "--pieces", &pieces, "Piece sizes");
  app.add_option("--threads", thread_counts, "Thread counts")->delimiter(',');
  app.add_option("--reps", reps, "Repetitions of each")->check(CLI::Range(1, 100));
  app.add_option("--dir", dir, "Where the file goes");
  if (const int rc = cmt::bench::parse_command_line(app, argc, argv); rc >= 0) return rc;

  Setup s;
  CUdevice dev;
  CMT_CHECK_CU(cuInit(0));
  CMT_CHECK_CU(cuDeviceGet(&dev, 0));
  CMT_CHECK_CU(cuDevicePrimaryCtxRetain(&s.ctx, dev));
  CMT_CHECK_CU(cuCtxSetCurrent(s.ctx));
  CMT_CHECK_CU(cuMemAlloc(&s.device, bytes));
  const int most = *std::max_element(thread_counts.begin(), thread_counts.end());
  s.streams.resize(most);
  for (CUstream& st : s.streams) CMT_CHECK_CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  const int fd = cmt::bench::page_cache_file(dir, bytes);
  if (fd < 0) {
    std::perror("cmt-lab-register-stream: the file");
    return 1;
  }
  char* resident = static_cast<char*>(aligned_alloc(4096, bytes));
  if (pread(fd, resident, bytes, 0) != static_cast<ssize_t>(bytes)) return 1;

  std::printf("%zu MiB; GB/s, median of %d; pinned DMA in the same pieces, one stream\n",
              bytes >> 20, reps);
  for (std::size_t piece : pieces) {
    std::printf("piece %zu KiB: pinned %.1f\n", piece >> 10, pinned_gbps(s, bytes, piece, reps));
    for (const bool file : {true, false}) {
      for (int threads : thread_counts) {
        std::vector<double> reg, regdma, unreg;
        bool checked = true;
        for (int r = 0; r < reps; ++r) {
          char* src = resident;
          if (file) {
            void* m = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
            if (m == MAP_FAILED) return 1;
            src = static_cast<char*>(m);
          }
          const Times t = one_rep(s, src, bytes, piece, threads,
                                  file ? CU_MEMHOSTREGISTER_READ_ONLY : 0);
          if (r == 0) checked = device_matches(s, src, bytes);
          if (file) munmap(src, bytes);
          reg.push_back(bytes / t.reg / 1e9);
          regdma.push_back(bytes / t.regdma / 1e9);
          unreg.push_back(bytes / t.unreg / 1e9);
        }
        std::printf("  %-8s %2d threads: reg %6.1f  regdma %6.1f  unreg %6.1f  bytes %s\n",
                    file ? "file" : "resident", threads, median(reg), median(regdma),
                    median(unreg), checked ? "ok" : "WRONG");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
