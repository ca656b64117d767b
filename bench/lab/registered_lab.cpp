// cmt-lab-registered (lab): what a copy from a registered host buffer costs against one from
// cudaMallocHost memory, call by call, so that the hot path (interposer.cpp run_hot_copy) is
// judged against what registered memory itself can do rather than against pinned alone
// (NOTES.md 53).
//
// One copy is the call and its stream's synchronize, as a program copying a buffer in a loop
// makes it; per size and direction the modes rotate every repetition, so drift hits all alike:
//   pinned      cudaMallocHost buffer, cudaMemcpyAsync + cudaStreamSynchronize
//   registered  malloc'd buffer the program registered (cuMemHostRegister, portable), the same
//   driver      the registered buffer as cmt's hot path copies it: cuMemcpy*Async +
//               cuStreamSynchronize, then the program's own cudaStreamSynchronize
//   hotcalls    driver, plus what the hot path asks around the copy: cuStreamIsCapturing and two
//               cuThreadExchangeStreamCaptureMode
//   pageable    another malloc'd buffer, cudaMemcpyAsync + cudaStreamSynchronize: CUDA's staging
//               without cmt; under `cmt run` with CMT_REGISTER=hot, cmt's hot path
// Each mode's bytes are checked after each size and direction's copies. Prints median ns per copy
// and the ratio to pinned's. With --offset N the registered and pageable buffers' copies start N
// bytes into a page, as malloc's (16) and torch's (64) buffers do, while cudaMallocHost's stay
// page-aligned: what an unaligned host address costs the DMA (session 25: `cmt bench copy`, whose
// buffers are malloc'd, read hot at 0.84 of pinned at 64 KiB D2H where this lab read 0.95).
//
// Two switches make it copy as `cmt bench copy --threads 1` does, to find what that loop adds per
// copy (1.3-2 us to pinned copies, 2.7-4 us to hot ones at 64-256 KiB, NOTES.md 77): --thread
// fresh makes each size and direction's copies on a new thread kept on the GPU's local cores (the
// stream still the main thread's), and --buffers malloc gives the pageable buffer of each size
// from malloc(size) on such a thread (its arena's heap or an mmap'd chunk, 16 bytes into a page).
// Those two did not reproduce the loop's loss (NOTES.md 89: the loop adds 1.2-1.5 us to a hot copy
// and nothing to a pinned one). A third does what else the benchmark's loop has: --neighbour
// default mallocs, just before each pageable buffer and on the same thread, the buffer of the
// benchmark's default mode (so the two may share a page, as the benchmark's do) and adds a sixth
// mode, default: copies from it with the thread opted out of cmt (cmt_forward_this_thread), CUDA's
// own pageable path, rotating with the others (with --block 5000, in blocks as the benchmark's
// windows are). --neighbour idle mallocs that buffer the same way but never copies it: the shared
// page without CUDA's pageable copies in between. --thread block makes each block's copies on a
// new thread, as cmt bench copy makes a thread for each window. None of them brought the loop's
// loss back reliably, and on one instance the driver mode, without cmt, lost as much as the hot
// path: the second stream wait a pageable copy owes its caller (NOTES.md 90).
//
// usage: cmt-lab-registered [--sizes 64K,256K,1M] [--reps 2000] [--offset 0] [--block 1]
//                           [--thread main|fresh|block] [--buffers aligned|malloc]
//                           [--neighbour none|idle|default]
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "common/byte_size.h"
#include "cuda_check.h"
#include "engine/shared/gpu_locality.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// What a loop of these copies runs at: the mean, which a slow tail moves and the median hides
// (`cmt bench copy` times loops, and read hot 64 KiB at 0.85 of pinned where medians read 0.97).
double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

struct Buffers {
  char* pinned = nullptr;
  char* registered = nullptr;
  char* pageable = nullptr;
  char* neighbour = nullptr;  // --neighbour default: the benchmark's default-mode buffer
  CUdeviceptr device = 0;
  cudaStream_t stream = nullptr;
};

// One copy of `bytes` between `host` and the device, made the way `mode` says.
using CopyFn = std::function<void(char* host, std::size_t bytes, bool h2d)>;

struct Mode {
  const char* name;
  char* Buffers::*buffer;
  CopyFn copy;
};

// cmt's switch for a thread's copies (hooks/runtime_hooks.cpp); nullptr without libcmt.so.
using ForwardFn = int (*)(int);
ForwardFn forward_switch() {
  return reinterpret_cast<ForwardFn>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread"));
}

std::vector<Mode> modes(Buffers& b, bool with_default) {
  auto runtime = [&b](char* host, std::size_t bytes, bool h2d) {
    void* dev = reinterpret_cast<void*>(b.device);
    CMT_CHECK_CUDA(h2d ? cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, b.stream)
                       : cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, b.stream));
    CMT_CHECK_CUDA(cudaStreamSynchronize(b.stream));
  };
  auto driver = [&b](char* host, std::size_t bytes, bool h2d) {
    CUstream s = reinterpret_cast<CUstream>(b.stream);
    CMT_CHECK_CU(h2d ? cuMemcpyHtoDAsync(b.device, host, bytes, s)
                     : cuMemcpyDtoHAsync(host, b.device, bytes, s));
    CMT_CHECK_CU(cuStreamSynchronize(s));
    CMT_CHECK_CUDA(cudaStreamSynchronize(b.stream));
  };
  auto hotcalls = [&b, driver](char* host, std::size_t bytes, bool h2d) {
    CUstreamCaptureStatus status;
    CMT_CHECK_CU(cuStreamIsCapturing(reinterpret_cast<CUstream>(b.stream), &status));
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CMT_CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
    driver(host, bytes, h2d);
    CMT_CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
  };
  // The benchmark's default mode: CUDA's own path, the thread opted out of cmt for the copy.
  auto opted_out = [runtime](char* host, std::size_t bytes, bool h2d) {
    static const ForwardFn forward = forward_switch();
    if (forward) forward(1);
    runtime(host, bytes, h2d);
    if (forward) forward(0);
  };
  std::vector<Mode> all = {{"pinned", &Buffers::pinned, runtime},
                           {"registered", &Buffers::registered, runtime},
                           {"driver", &Buffers::registered, driver},
                           {"hotcalls", &Buffers::registered, hotcalls},
                           {"pageable", &Buffers::pageable, runtime}};
  if (with_default) all.push_back({"default", &Buffers::neighbour, opted_out});
  return all;
}

// Every mode's copy of `bytes` moves the right bytes, one way then back.
bool check(Buffers& b, const Mode& m, std::size_t bytes) {
  char* host = b.*m.buffer;
  for (std::size_t i = 0; i < bytes; ++i) host[i] = static_cast<char>(i * 7 + bytes);
  m.copy(host, bytes, true);
  std::memset(host, 0, bytes);
  m.copy(host, bytes, false);
  for (std::size_t i = 0; i < bytes; ++i)
    if (host[i] != static_cast<char>(i * 7 + bytes)) return false;
  return true;
}

// Every mode's copies of `bytes` one way, `block` at a time in rotation, the first 20 of each
// mode warming it up: ns per copy, by mode. Each block runs inside `around` (on a thread of its
// own for --thread block, as each of cmt bench copy's windows does).
using Around = std::function<void(const std::function<void()>&)>;
std::vector<std::vector<double>> measure(const std::vector<Mode>& all, Buffers& b,
                                         std::size_t bytes, bool h2d, int reps, int block,
                                         const Around& around) {
  std::vector<std::vector<double>> ns(all.size());
  for (int r = 0; r < (reps + 20 + block - 1) / block; ++r)
    for (std::size_t k = 0; k < all.size(); ++k) {
      const std::size_t which = (k + r) % all.size();
      const Mode& m = all[which];
      around([&] {
        for (int i = 0; i < block; ++i) {
          const auto t0 = Clock::now();
          m.copy(b.*m.buffer, bytes, h2d);
          const double t = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
          if (r * block + i >= 20) ns[which].push_back(t);
        }
      });
    }
  return ns;
}

void print(const std::vector<std::vector<double>>& ns, std::size_t bytes, bool h2d) {
  std::printf("%-6s %s ", cmt::format_byte_size(bytes).c_str(), h2d ? "h2d" : "d2h");
  const double pinned = median(ns[0]);
  for (const auto& v : ns) std::printf(" %6.0f (%4.2f)", median(v), pinned / median(v));
  std::printf("\n         mean");
  for (const auto& v : ns) std::printf(" %6.0f (%4.2f)", mean(v), mean(ns[0]) / mean(v));
  std::printf("\n          p99");
  for (const auto& v : ns) std::printf(" %6.0f       ", percentile(v, 0.99));
  std::printf("\n");
}

// Runs `work` on a new thread kept on `cpus` with device 0 current, as cmt bench copy's window
// threads are, and waits for it.
void on_fresh_thread(const std::vector<int>& cpus, const std::function<void()>& work) {
  std::thread([&] {
    cmt::pin_current_thread(cpus);
    CMT_CHECK_CUDA(cudaSetDevice(0));
    work();
  }).join();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes = {64u << 10, 256u << 10, 1u << 20};
  int reps = 2000;
  std::size_t offset = 0;
  CLI::App app{"cmt-lab-registered: a copy from registered memory against one from cudaMallocHost "
               "memory, call by call"};
  cmt::bench::add_sizes(app, "--sizes", &sizes, "Copy sizes");
  app.add_option("--reps", reps, "Timed copies of each mode per size and direction")
      ->check(CLI::PositiveNumber);
  int block = 1;
  app.add_option("--block", block,
                 "Copies of one mode back to back before the next mode's (1: "
                 "the modes rotate every copy; cmt bench copy's loop is one mode for 0.2 s)")
      ->check(CLI::PositiveNumber);
  app.add_option("--offset", offset, "Bytes into a page where the registered and pageable "
                 "buffers start (cudaMallocHost's stay page-aligned)")
      ->check(CLI::Range(0, 4095));
  std::string thread = "main", buffers = "aligned";
  app.add_option("--thread", thread,
                 "Where the copies are made: main (this thread), fresh (a new thread for each "
                 "size and direction, kept on the GPU's local cores), or block (a new such "
                 "thread for each block, as cmt bench copy makes one for each window)")
      ->check(CLI::IsMember({"main", "fresh", "block"}));
  app.add_option("--buffers", buffers,
                 "The pageable buffer: aligned (page-aligned, one for all sizes), or malloc "
                 "(malloc(size) for each size on a thread on the GPU's cores, as cmt bench copy's)")
      ->check(CLI::IsMember({"aligned", "malloc"}));
  std::string neighbour = "none";
  app.add_option("--neighbour", neighbour,
                 "none; default: a sixth mode, CUDA's own path with the thread opted out of "
                 "cmt, from a buffer malloc'd just before the pageable one (as cmt bench copy's "
                 "default-mode buffer is); idle: that buffer malloc'd but never copied")
      ->check(CLI::IsMember({"none", "idle", "default"}));
  CLI11_PARSE(app, argc, argv);
  const bool fresh_thread = thread == "fresh", thread_a_block = thread == "block";
  const bool malloc_buffers = buffers == "malloc";
  const bool with_default = neighbour == "default";
  const bool with_neighbour = neighbour != "none";  // malloc'd before the pageable buffer
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "cmt-lab-registered: no CUDA GPU found\n");
    return 1;
  }
  const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());
  Buffers b;
  CMT_CHECK_CUDA(cudaSetDevice(0));
  CMT_CHECK_CUDA(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  CMT_CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&b.pinned), largest));
  // Whole pages each: the program's registration must not share a page with the pageable
  // buffer, which CUDA would then refuse to register for cmt.
  const std::size_t pages = (largest + offset + 4095) / 4096 * 4096;
  if (posix_memalign(reinterpret_cast<void**>(&b.registered), 4096, pages) != 0 ||
      posix_memalign(reinterpret_cast<void**>(&b.pageable), 4096, pages) != 0) {
    std::fprintf(stderr, "cmt-lab-registered: out of memory\n");
    return 1;
  }
  b.registered += offset;
  b.pageable += offset;
  std::memset(b.registered, 1, largest);
  std::memset(b.pageable, 1, largest);
  CMT_CHECK_CU(cuMemHostRegister(b.registered, largest, CU_MEMHOSTREGISTER_PORTABLE));
  CMT_CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&b.device), largest));
  std::vector<char> neighbour_memory(with_neighbour && !malloc_buffers ? largest : 0, 1);
  b.neighbour = neighbour_memory.data();
  std::vector<Mode> all = modes(b, with_default);
  char pci[64] = {};
  CMT_CHECK_CUDA(cudaDeviceGetPCIBusId(pci, sizeof(pci), 0));
  const std::vector<int> cpus = cmt::gpu_locality(pci).cpus;
  std::printf("copies on the %s thread%s; pageable buffer %s%s\n", thread.c_str(),
              fresh_thread || thread_a_block ? " (on the GPU's local cores)" : "",
              malloc_buffers ? "malloc(size) for each size" : "page-aligned",
              with_default     ? "; default: CUDA's own path from the buffer malloc'd before it"
              : with_neighbour ? "; a buffer malloc'd before it, never copied"
                               : "");
  std::printf("size   dir ");
  for (const Mode& m : all) std::printf(" %12s", m.name);
  std::printf("   (median ns per copy, then mean and 99th percentile; / pinned)\n");
  bool ok = true;
  for (std::size_t bytes : sizes)
    for (bool h2d : {true, false}) {
      char* aligned = b.pageable;
      char* own = nullptr;
      if (malloc_buffers) {  // the benchmark's: malloc(bytes) on a thread on the GPU's cores
        on_fresh_thread(cpus, [&] {
          // The benchmark mallocs its default-mode buffer, then cmt's, on one thread.
          if (with_neighbour) b.neighbour = static_cast<char*>(std::malloc(bytes));
          own = static_cast<char*>(std::malloc(bytes));
        });
        if (!own || (with_neighbour && !b.neighbour)) {
          std::fprintf(stderr, "cmt-lab-registered: out of memory\n");
          return 1;
        }
        std::memset(own, 1, bytes);
        if (with_neighbour) std::memset(b.neighbour, 1, bytes);
        b.pageable = own;
      }
      std::vector<std::vector<double>> ns;
      const Around around = [&](const std::function<void()>& copies) {
        thread_a_block ? on_fresh_thread(cpus, copies) : copies();
      };
      auto run = [&] { ns = measure(all, b, bytes, h2d, reps, block, around); };
      fresh_thread ? on_fresh_thread(cpus, run) : run();
      print(ns, bytes, h2d);
      for (const Mode& m : all)
        if (!check(b, m, bytes)) {
          std::printf("WRONG BYTES: %s at %zu\n", m.name, bytes);
          ok = false;
        }
      b.pageable = aligned;
      std::free(own);
      if (malloc_buffers && with_neighbour) std::free(b.neighbour);
    }
  std::printf("check %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
