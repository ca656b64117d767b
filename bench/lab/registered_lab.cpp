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
// Each mode's bytes are checked once per size and direction. Prints median ns per copy and the
// ratio to pinned's. With --offset N the registered and pageable buffers' copies start N bytes
// into a page, as malloc's (16) and torch's (64) buffers do, while cudaMallocHost's stay
// page-aligned: what an unaligned host address costs the DMA (session 25: `cmt bench copy`, whose
// buffers are malloc'd, read hot at 0.84 of pinned at 64 KiB D2H where this lab read 0.95).
//
// usage: cmt-lab-registered [--sizes 64K,256K,1M] [--reps 2000] [--offset 0] [--block 1]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "bench_cli.h"
#include "common/byte_size.h"
#include "cuda_check.h"

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

std::vector<Mode> modes(Buffers& b) {
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
  return {{"pinned", &Buffers::pinned, runtime},
          {"registered", &Buffers::registered, runtime},
          {"driver", &Buffers::registered, driver},
          {"hotcalls", &Buffers::registered, hotcalls},
          {"pageable", &Buffers::pageable, runtime}};
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
  CLI11_PARSE(app, argc, argv);
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
  std::vector<Mode> all = modes(b);
  std::printf(
      "size   dir  %12s %12s %12s %12s %12s   (median ns per copy, then mean and 99th percentile; "
      "/ pinned)\n",
      all[0].name, all[1].name, all[2].name, all[3].name, all[4].name);
  bool ok = true;
  for (std::size_t bytes : sizes)
    for (bool h2d : {true, false}) {
      std::vector<std::vector<double>> ns(all.size());
      // Rounds of `block` copies of each mode, the first 20 copies of each warming it up.
      for (int r = 0; r < (reps + 20 + block - 1) / block; ++r)
        for (std::size_t k = 0; k < all.size(); ++k) {
          const std::size_t which = (k + r) % all.size();
          const Mode& m = all[which];
          for (int i = 0; i < block; ++i) {
            const auto t0 = Clock::now();
            m.copy(b.*m.buffer, bytes, h2d);
            const double t = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
            if (r * block + i >= 20) ns[which].push_back(t);
          }
        }
      std::printf("%-6s %s ", cmt::format_byte_size(bytes).c_str(), h2d ? "h2d" : "d2h");
      const double pinned = median(ns[0]);
      for (std::size_t k = 0; k < all.size(); ++k)
        std::printf(" %6.0f (%4.2f)", median(ns[k]), pinned / median(ns[k]));
      std::printf("\n         mean");
      for (std::size_t k = 0; k < all.size(); ++k)
        std::printf(" %6.0f (%4.2f)", mean(ns[k]), mean(ns[0]) / mean(ns[k]));
      std::printf("\n          p99");
      for (std::size_t k = 0; k < all.size(); ++k)
        std::printf(" %6.0f       ", percentile(ns[k], 0.99));
      std::printf("\n");
    }
  for (const Mode& m : all)
    for (std::size_t bytes : sizes)
      if (!check(b, m, bytes)) {
        std::printf("WRONG BYTES: %s at %zu\n", m.name, bytes);
        ok = false;
      }
  std::printf("check %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
