// cmt-lab-register-beside (lab, GPU): whether a thread registering host memory holds up the CUDA
// calls another thread of the process makes meanwhile (issue 33). Hot buffers register a range at
// a copy of the program's; made on a thread of cmt's instead, the program's copy could go on
// staged while the pages are pinned, and the registration would cost the program nothing, unless
// the driver makes the program's own calls wait for it (it serialises registrations, NOTES 74).
// Thread A repeats one operation and times each: a copy from pinned memory, a copy from malloc'd
// memory (CUDA's own staging), or an empty kernel's launch, each followed by a stream
// synchronize; meanwhile thread B is idle, or registers and unregisters a malloc'd buffer of 16 or
// 256 MiB again and again. Printed: A's median, p90, p99 and largest time per operation, and how
// many registrations B made meanwhile.
//
// usage: cmt-lab-register-beside [--ms 400]
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda_check.h"

namespace {

const char kEmptyPtx[] = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry cmt_empty()
{
  ret;
}
)";

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double at(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * v.size()))];
}

struct Op {
  std::string name;
  CUdeviceptr dev;
  const void* host;  // nullptr: a launch
  std::size_t bytes;
};

// Thread B: registers and unregisters `bytes` of `host` until told to stop; how many it made.
void register_loop(CUcontext ctx, void* host, std::size_t bytes, std::atomic<bool>* stop,
                   std::atomic<bool>* started, long* made, std::vector<double>* reg_us) {
  CMT_CHECK_CU(cuCtxSetCurrent(ctx));
  started->store(true);
  while (!stop->load()) {
    const auto t0 = Clock::now();
    CMT_CHECK_CU(cuMemHostRegister(host, bytes, CU_MEMHOSTREGISTER_PORTABLE));
    reg_us->push_back(us_since(t0));
    CMT_CHECK_CU(cuMemHostUnregister(host));
    ++*made;
  }
}

}  // namespace

int main(int argc, char** argv) {
  double run_ms = 400;
  if (argc == 3 && !std::strcmp(argv[1], "--ms")) {
    run_ms = std::atof(argv[2]);
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: %s [--ms 400]\n", argv[0]);
    return 2;
  }
  CUdevice device;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  CMT_CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, device));
  CMT_CHECK_CU(cuCtxSetCurrent(ctx));
  CUmodule module;
  CUfunction empty;
  CMT_CHECK_CU(cuModuleLoadData(&module, kEmptyPtx));
  CMT_CHECK_CU(cuModuleGetFunction(&empty, module, "cmt_empty"));
  CUstream stream;
  CMT_CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  const std::size_t big = std::size_t{16} << 20;
  void* pinned;
  CMT_CHECK_CU(cuMemHostAlloc(&pinned, big, 0));
  std::memset(pinned, 3, big);
  void* pageable = std::aligned_alloc(4096, big);
  if (!pageable) return 1;
  std::memset(pageable, 4, big);
  CUdeviceptr dev;
  CMT_CHECK_CU(cuMemAlloc(&dev, big));
  const std::vector<Op> ops = {{"pinned 1M", dev, pinned, 1u << 20},
                               {"pageable 1M", dev, pageable, 1u << 20},
                               {"pageable 16M", dev, pageable, big},
                               {"launch", dev, nullptr, 0}};
  std::printf(
      "thread A's time per operation (us) while thread B is idle or registers; %.0f ms "
      "each\n%-13s %-10s %8s %8s %8s %9s %7s %10s\n",
      run_ms, "A", "B", "median", "p90", "p99", "max", "ops", "B regs");
  for (const std::size_t reg_bytes :
       {std::size_t{0}, std::size_t{16} << 20, std::size_t{256} << 20}) {
    void* reg_host = reg_bytes ? std::aligned_alloc(4096, reg_bytes) : nullptr;
    if (reg_bytes && !reg_host) return 1;
    if (reg_host) std::memset(reg_host, 5, reg_bytes);
    for (const Op& op : ops) {
      std::atomic<bool> stop{false}, started{false};
      long made = 0;
      std::vector<double> reg_us;
      std::thread b;
      if (reg_bytes) {
        b = std::thread(register_loop, ctx, reg_host, reg_bytes, &stop, &started, &made, &reg_us);
        while (!started.load()) std::this_thread::yield();
      }
      std::vector<double> us;
      const auto end = Clock::now() + std::chrono::duration<double, std::milli>(run_ms);
      while (Clock::now() < end) {
        const auto t0 = Clock::now();
        if (op.host) {
          CMT_CHECK_CU(cuMemcpyHtoDAsync(op.dev, op.host, op.bytes, stream));
        } else {
          CMT_CHECK_CU(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
        }
        CMT_CHECK_CU(cuStreamSynchronize(stream));
        us.push_back(us_since(t0));
      }
      stop.store(true);
      if (b.joinable()) b.join();
      const std::string who = reg_bytes ? "reg " + std::to_string(reg_bytes >> 20) + "M" : "idle";
      std::printf("%-13s %-10s %8.1f %8.1f %8.1f %9.1f %7zu %5ld", op.name.c_str(), who.c_str(),
                  at(us, 0.5), at(us, 0.9), at(us, 0.99), at(us, 1.0), us.size(), made);
      if (!reg_us.empty()) std::printf(" (%.0f us each)", at(reg_us, 0.5));
      std::printf("\n");
    }
    std::free(reg_host);
  }
  // The copies were real: the last 16 MiB from pageable memory is on the GPU.
  std::vector<unsigned char> back(big);
  CMT_CHECK_CU(cuMemcpyDtoH(back.data(), dev, big));
  const long wrong = static_cast<long>(
      std::count_if(back.begin(), back.end(), [](unsigned char c) { return c != 4; }));
  std::printf("wrong bytes %ld\n", wrong);
  return wrong ? 1 : 0;
}
