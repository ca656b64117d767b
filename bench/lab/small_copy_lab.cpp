// cmt-lab-small (lab): what copies of 64 KiB to a few MiB can reach through a pinned bounce
// buffer, without libcmt.so, so that the engine's small-copy path is built against measured
// floors rather than guesses (NOTES.md 33).
//
//   1. The driver calls a copy through cmt makes, each timed alone (median ns of many calls):
//      what classifying a copy and tracking its pieces cost before any byte moves.
//   2. Per size and direction, each timed from the call to the bytes in place (call + stream
//      synchronize), modes rotating every repetition so drift hits all alike:
//        default  cudaMemcpy on pageable memory (CUDA's staging)
//        pinned   cudaMemcpyAsync from/to a pinned buffer: the ceiling
//        bounce   one DMA through a pinned bounce buffer, the bytes copied by the calling thread
//        pipe1    the same in pieces, one event each: the caller copies piece i while the DMA
//                 of piece i+1 runs (no other thread)
//        pipeN    pipe1 with N helper threads already spinning, each piece split among them
//   Every mode's bytes are checked.
//
// usage: cmt-lab-small [--sizes 64K,256K,1M,2M,4M] [--reps 200] [--helpers 3] [--piece 256K]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/byte_size.h"
#include "cuda_check.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double median_ns(int calls, F&& f) {
  std::vector<double> ns;
  for (int i = 0; i < calls; ++i) {
    auto t0 = Clock::now();
    f();
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  return median(ns);
}

// Helper threads that spin on a job: units [0, published) of `fn`, claimed in order.
class Helpers {
 public:
  explicit Helpers(unsigned n) {
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~Helpers() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }
  // Runs units [0, units) of `fn` on the helpers and the caller; returns when all are done.
  template <typename F>
  void run(std::size_t units, F&& fn) {
    fn_ = [&fn](std::size_t u) { fn(u); };
    claimed_.store(0);
    done_.store(0);
    published_.store(units, std::memory_order_release);
    for (;;) {
      std::size_t c = claimed_.fetch_add(1);
      if (c >= units) break;
      fn_(c);
      done_.fetch_add(1);
    }
    while (done_.load(std::memory_order_acquire) < units) {
    }
    published_.store(0, std::memory_order_release);
    while (inside_.load() != 0) {
    }
  }

 private:
  void loop() {
    while (!stop_.load(std::memory_order_relaxed)) {
      const std::size_t p = published_.load(std::memory_order_acquire);
      if (p == 0 || claimed_.load(std::memory_order_relaxed) >= p) continue;
      inside_.fetch_add(1);
      const std::size_t again = published_.load(std::memory_order_acquire);
      std::size_t c;
      while (again && (c = claimed_.fetch_add(1)) < again) {
        fn_(c);
        done_.fetch_add(1);
      }
      inside_.fetch_sub(1);
    }
  }
  std::vector<std::thread> threads_;
  std::function<void(std::size_t)> fn_;
  alignas(64) std::atomic<std::size_t> published_{0};
  alignas(64) std::atomic<std::size_t> claimed_{0};
  alignas(64) std::atomic<std::size_t> done_{0};
  alignas(64) std::atomic<unsigned> inside_{0};
  std::atomic<bool> stop_{false};
};

struct Lab {
  std::size_t largest = 0, piece = 256 << 10;
  char *pageable = nullptr, *pageable_out = nullptr, *pinned = nullptr, *bounce = nullptr;
  void* device = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;
  Helpers* helpers = nullptr;
  unsigned helper_count = 0;
};

// Copies `bytes` from `from` to `to` on the caller and, if any, the helpers, in 64 KiB units.
void split_copy(Lab& lab, bool use_helpers, char* to, const char* from, std::size_t bytes) {
  constexpr std::size_t kUnit = 64 << 10;
  if (!use_helpers || bytes <= kUnit) {
    std::memcpy(to, from, bytes);
    return;
  }
  const std::size_t units = (bytes + kUnit - 1) / kUnit;
  lab.helpers->run(units, [&](std::size_t u) {
    const std::size_t off = u * kUnit;
    std::memcpy(to + off, from + off, std::min(kUnit, bytes - off));
  });
}

// One copy of `bytes` in `mode`; false on a CUDA error.
bool copy_once(Lab& lab, const std::string& mode, bool h2d, std::size_t bytes) {
  char* dev = static_cast<char*>(lab.device);
  if (mode == "default") {
    return h2d ? cudaMemcpy(dev, lab.pageable, bytes, cudaMemcpyHostToDevice) == cudaSuccess
               : cudaMemcpy(lab.pageable_out, dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  }
  if (mode == "pinned") {
    const cudaError_t r = h2d ? cudaMemcpyAsync(dev, lab.pinned, bytes, cudaMemcpyHostToDevice, lab.stream)
                              : cudaMemcpyAsync(lab.pinned, dev, bytes, cudaMemcpyDeviceToHost, lab.stream);
    return r == cudaSuccess && cudaStreamSynchronize(lab.stream) == cudaSuccess;
  }
  const bool pipelined = mode != "bounce";
  const bool helped = mode == "pipeN";
  const std::size_t piece = pipelined ? std::min(lab.piece, bytes) : bytes;
  const std::size_t pieces = (bytes + piece - 1) / piece;
  if (h2d) {
    for (std::size_t p = 0; p < pieces; ++p) {
      const std::size_t off = p * piece, n = std::min(piece, bytes - off);
      split_copy(lab, helped, lab.bounce + off, lab.pageable + off, n);
      if (cudaMemcpyAsync(dev + off, lab.bounce + off, n, cudaMemcpyHostToDevice, lab.stream) !=
          cudaSuccess)
        return false;
    }
    return cudaStreamSynchronize(lab.stream) == cudaSuccess;
  }
  for (std::size_t p = 0; p < pieces; ++p) {
    const std::size_t off = p * piece, n = std::min(piece, bytes - off);
    if (cudaMemcpyAsync(lab.bounce + off, dev + off, n, cudaMemcpyDeviceToHost, lab.stream) !=
            cudaSuccess ||
        cudaEventRecord(lab.events[p], lab.stream) != cudaSuccess)
      return false;
  }
  for (std::size_t p = 0; p < pieces; ++p) {
    cudaError_t r;
    while ((r = cudaEventQuery(lab.events[p])) == cudaErrorNotReady) {
    }
    if (r != cudaSuccess) return false;
    const std::size_t off = p * piece, n = std::min(piece, bytes - off);
    split_copy(lab, helped, lab.pageable_out + off, lab.bounce + off, n);
  }
  return true;
}

bool check(Lab& lab, bool h2d, std::size_t bytes) {
  if (h2d) {
    std::vector<char> back(bytes);
    CMT_CHECK_CUDA(cudaMemcpy(back.data(), lab.device, bytes, cudaMemcpyDeviceToHost));
    return std::memcmp(back.data(), lab.pageable, bytes) == 0;
  }
  return std::memcmp(lab.pageable_out, lab.pageable, bytes) == 0;
}

void driver_costs(Lab& lab) {
  CUcontext ctx = nullptr;
  cuCtxGetCurrent(&ctx);
  auto ptr_attrs = [](const void* p) {
    unsigned type = 0, managed = 0;
    int ordinal = -1;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void* data[] = {&type, &managed, &ordinal};
    cuPointerGetAttributes(3, attrs, data, reinterpret_cast<CUdeviceptr>(p));
  };
  const CUstream s = reinterpret_cast<CUstream>(lab.stream);
  const CUevent e = reinterpret_cast<CUevent>(lab.events[0]);
  cuEventRecord(e, s);
  cuStreamSynchronize(s);
  struct Row {
    const char* what;
    double ns;
  };
  const int n = 5000;
  std::vector<Row> rows = {
      {"cuCtxGetCurrent", median_ns(n, [&] { cuCtxGetCurrent(&ctx); })},
      {"cuPointerGetAttributes (3, pageable)", median_ns(n, [&] { ptr_attrs(lab.pageable); })},
      {"cuPointerGetAttributes (3, device)", median_ns(n, [&] { ptr_attrs(lab.device); })},
      {"cuMemGetAddressRange", median_ns(n, [&] {
         CUdeviceptr base;
         size_t size;
         cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(lab.device));
       })},
      {"cuStreamGetCtx", median_ns(n, [&] {
         CUcontext c;
         cuStreamGetCtx(s, &c);
       })},
      {"cuStreamIsCapturing", median_ns(n, [&] {
         CUstreamCaptureStatus st;
         cuStreamIsCapturing(s, &st);
       })},
      {"cuThreadExchangeStreamCaptureMode x2", median_ns(n, [&] {
         CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
         cuThreadExchangeStreamCaptureMode(&m);
         cuThreadExchangeStreamCaptureMode(&m);
       })},
      {"cuEventQuery (completed)", median_ns(n, [&] { cuEventQuery(e); })},
      {"cuStreamSynchronize (idle)", median_ns(n, [&] { cuStreamSynchronize(s); })},
      {"cuMemcpyDtoHAsync 4 KiB + cuEventRecord (enqueue only)", median_ns(200, [&] {
         cuMemcpyDtoHAsync(lab.bounce, reinterpret_cast<CUdeviceptr>(lab.device), 4096, s);
         cuEventRecord(e, s);
       })},
      {"4 KiB pinned D2H round trip (enqueue + synchronize)", median_ns(1000, [&] {
         cuMemcpyDtoHAsync(lab.bounce, reinterpret_cast<CUdeviceptr>(lab.device), 4096, s);
         cuStreamSynchronize(s);
       })},
      {"4 KiB pinned H2D round trip (enqueue + synchronize)", median_ns(1000, [&] {
         cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(lab.device), lab.bounce, 4096, s);
         cuStreamSynchronize(s);
       })},
  };
  cuStreamSynchronize(s);
  std::printf("driver calls (median of many, ns):\n");
  for (const Row& r : rows) std::printf("  %-56s %8.0f\n", r.what, r.ns);
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "cmt-lab-small: %s\nusage: cmt-lab-small [--sizes 64K,256K,1M] [--reps N] "
               "[--helpers N] [--piece SIZE]\n",
               why.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes = {64u << 10, 128u << 10, 256u << 10, 512u << 10,
                                    1u << 20,  2u << 20,   4u << 20};
  int reps = 200;
  Lab lab;
  lab.helper_count = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("'" + a + "' needs a value");
    const std::string v = argv[++i];
    std::size_t bytes = 0;
    if (a == "--sizes") {
      sizes.clear();
      std::size_t start = 0;
      while (start <= v.size()) {
        const std::size_t comma = std::min(v.find(',', start), v.size());
        if (!cmt::parse_byte_size(v.substr(start, comma - start), &bytes) || bytes == 0)
          usage("bad size in '" + v + "'");
        sizes.push_back(bytes);
        start = comma + 1;
      }
    } else if (a == "--reps") {
      reps = std::atoi(v.c_str());
    } else if (a == "--helpers") {
      lab.helper_count = static_cast<unsigned>(std::atoi(v.c_str()));
    } else if (a == "--piece") {
      if (!cmt::parse_byte_size(v, &bytes) || bytes < 4096) usage("bad --piece '" + v + "'");
      lab.piece = bytes;
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (reps < 1) usage("--reps must be at least 1");
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "cmt-lab-small: no CUDA GPU found\n");
    return 1;
  }
  lab.largest = *std::max_element(sizes.begin(), sizes.end());
  lab.pageable = static_cast<char*>(std::malloc(lab.largest));
  lab.pageable_out = static_cast<char*>(std::malloc(lab.largest));
  for (std::size_t i = 0; i < lab.largest; ++i) lab.pageable[i] = static_cast<char>(i * 131 + 7);
  std::memset(lab.pageable_out, 0, lab.largest);
  CMT_CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&lab.pinned), lab.largest));
  CMT_CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&lab.bounce), lab.largest));
  std::memcpy(lab.pinned, lab.pageable, lab.largest);
  CMT_CHECK_CUDA(cudaMalloc(&lab.device, lab.largest));
  CMT_CHECK_CUDA(cudaStreamCreateWithFlags(&lab.stream, cudaStreamNonBlocking));
  lab.events.resize(lab.largest / 4096 + 1);
  for (auto& e : lab.events) CMT_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  Helpers helpers(lab.helper_count);
  lab.helpers = &helpers;

  driver_costs(lab);
  const std::vector<std::string> modes = {"default", "pinned", "bounce", "pipe1", "pipeN"};
  std::printf("GB/s, median of %d (call to bytes in place); pieces of %s, pipeN: caller + %u "
              "helpers\n%8s %4s", reps, cmt::format_byte_size(lab.piece).c_str(),
              lab.helper_count, "size", "dir");
  for (const auto& m : modes) std::printf(" %9s", m.c_str());
  std::printf("   best/default\n");
  int failures = 0;
  for (std::size_t bytes : sizes)
    for (bool h2d : {true, false}) {
      if (!h2d) CMT_CHECK_CUDA(cudaMemcpy(lab.device, lab.pinned, bytes, cudaMemcpyHostToDevice));
      std::vector<std::vector<double>> gbps(modes.size());
      for (int r = -1; r < reps; ++r)
        for (std::size_t k = 0; k < modes.size(); ++k) {
          const std::size_t m = (k + static_cast<std::size_t>(r + 1)) % modes.size();
          if (!h2d) std::memset(lab.pageable_out, 0, bytes);
          auto t0 = Clock::now();
          if (!copy_once(lab, modes[m], h2d, bytes)) {
            std::fprintf(stderr, "cmt-lab-small: %s failed\n", modes[m].c_str());
            return 1;
          }
          const double s = std::chrono::duration<double>(Clock::now() - t0).count();
          if (modes[m] != "pinned" && !check(lab, h2d, bytes)) ++failures;
          if (r >= 0) gbps[m].push_back(static_cast<double>(bytes) / s / 1e9);
        }
      std::printf("%8s %4s", cmt::format_byte_size(bytes).c_str(), h2d ? "H2D" : "D2H");
      double best = 0;
      for (std::size_t m = 0; m < modes.size(); ++m) {
        const double g = median(gbps[m]);
        std::printf(" %9.2f", g);
        if (m >= 2) best = std::max(best, g);
      }
      std::printf("   %.2fx\n", best / median(gbps[0]));
      std::fflush(stdout);
    }
  if (failures) std::printf("WRONG BYTES in %d copies\n", failures);
  return failures ? 1 : 0;
}
