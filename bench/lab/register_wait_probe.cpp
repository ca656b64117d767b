// cmt-lab-register-wait (lab, GPU): whether registering or unregistering host memory waits for
// work the program has queued on other streams (issue 33: hot buffers register a program's pages
// at a copy and unregister them at its free(), an eviction or exit; a call that waited for the
// whole device there would stall the program's thread behind its own kernels). For 64 KiB,
// 16 MiB and 256 MiB of page-aligned malloc'd memory: cuMemHostRegister and cuMemHostUnregister
// with the GPU idle, then each while a kernel spins for --spin-ms on a non-blocking stream of
// their own context, and a copy from the registered buffer on another non-blocking stream
// meanwhile (does it finish before the kernel?). Median ms of --reps each. Then, for 256 KiB and
// 16 MiB malloc'd buffers each copied to the GPU three times (under `cmt run` with
// CMT_REGISTER=hot, cmt registers them at the second copy), how long free() of the buffer takes
// while a kernel spins: cmt's release thread unregisters it and frees it later, so the free
// should not wait for the kernel. And then how long the program's next launch of an empty kernel
// on another stream takes (with its synchronize): while cmt's release thread is inside
// cuMemHostUnregister, the driver holds up the process's other CUDA calls (bench/lab/NOTES.md 96),
// so a free that returns at once may only move the wait to the next call.
//
// usage: cmt-lab-register-wait [--spin-ms 50] [--reps 5]
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

// Spins until %globaltimer has moved `ns` nanoseconds past its first reading.
const char kSpinPtx[] = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry cmt_spin(.param .u64 ns)
{
  .reg .u64 %start, %now, %gone, %want;
  .reg .pred %more;
  ld.param.u64 %want, [ns];
  mov.u64 %start, %globaltimer;
AGAIN:
  mov.u64 %now, %globaltimer;
  sub.u64 %gone, %now, %start;
  setp.lt.u64 %more, %gone, %want;
  @%more bra AGAIN;
  ret;
}
.visible .entry cmt_empty()
{
  ret;
}
)";

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Times {
  std::vector<double> reg, unreg, copy;
};

// One rep: register, (copy on `other` while busy), unregister; each call's own time.
void one_rep(void* host, std::size_t bytes, CUdeviceptr dev, CUstream other, Times& t) {
  auto t0 = std::chrono::steady_clock::now();
  CMT_CHECK_CU(cuMemHostRegister(host, bytes, CU_MEMHOSTREGISTER_PORTABLE));
  t.reg.push_back(ms_since(t0));
  t0 = std::chrono::steady_clock::now();
  CMT_CHECK_CU(cuMemcpyHtoDAsync(dev, host, bytes, other));
  CMT_CHECK_CU(cuStreamSynchronize(other));
  t.copy.push_back(ms_since(t0));
  t0 = std::chrono::steady_clock::now();
  CMT_CHECK_CU(cuMemHostUnregister(host));
  t.unreg.push_back(ms_since(t0));
}

// The same wait seen from another thread, with no cmt: 16 MiB registered, the kernel spinning,
// one thread unregisters it while the main thread launches an empty kernel on a third stream.
bool unregister_beside_launch(CUcontext context, CUfunction spin, CUfunction empty, CUstream busy,
                              CUstream other, double spin_ms, int reps) {
  const std::size_t bytes = std::size_t{16} << 20;
  void* host = std::aligned_alloc(4096, bytes);
  if (!host) return false;
  std::memset(host, 3, bytes);
  std::vector<double> unreg, launch;
  for (int r = 0; r < reps; ++r) {
    CMT_CHECK_CU(cuMemHostRegister(host, bytes, CU_MEMHOSTREGISTER_PORTABLE));
    unsigned long long ns = static_cast<unsigned long long>(spin_ms * 1e6);
    void* args[] = {&ns};
    CMT_CHECK_CU(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, busy, args, nullptr));
    std::atomic<bool> in{false};
    double took = 0;
    std::thread b([&] {
      CMT_CHECK_CU(cuCtxSetCurrent(context));
      in.store(true);
      const auto t0 = std::chrono::steady_clock::now();
      CMT_CHECK_CU(cuMemHostUnregister(host));
      took = ms_since(t0);
    });
    while (!in.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const auto t1 = std::chrono::steady_clock::now();
    CMT_CHECK_CU(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, other, nullptr, nullptr));
    CMT_CHECK_CU(cuStreamSynchronize(other));
    launch.push_back(ms_since(t1));
    b.join();
    unreg.push_back(took);
    CMT_CHECK_CU(cuStreamSynchronize(busy));
  }
  std::printf(
      "16384K   unregistered on another thread %.3f ms; a launch on a third stream "
      "meanwhile %.3f ms\n",
      median(unreg), median(launch));
  std::free(host);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  double spin_ms = 50;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--spin-ms"))
      spin_ms = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--spin-ms 50] [--reps 5]\n", argv[0]);
      return 2;
    }
  }
  if (argc % 2 == 0 || reps < 1 || spin_ms <= 0) {
    std::fprintf(stderr, "usage: %s [--spin-ms 50] [--reps 5]\n", argv[0]);
    return 2;
  }
  CUdevice device;
  CUcontext context;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  CMT_CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  CMT_CHECK_CU(cuCtxSetCurrent(context));
  CUmodule module;
  CUfunction spin, empty;
  CMT_CHECK_CU(cuModuleLoadData(&module, kSpinPtx));
  CMT_CHECK_CU(cuModuleGetFunction(&spin, module, "cmt_spin"));
  CMT_CHECK_CU(cuModuleGetFunction(&empty, module, "cmt_empty"));
  CUstream busy, other;
  CMT_CHECK_CU(cuStreamCreate(&busy, CU_STREAM_NON_BLOCKING));
  CMT_CHECK_CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  std::printf("spin %.0f ms on a stream of its own; median ms of %d\n", spin_ms, reps);
  std::printf("%-8s %-5s %10s %12s %10s\n", "size", "gpu", "register", "unregister", "copy(other)");
  for (std::size_t bytes : {std::size_t{64} << 10, std::size_t{16} << 20, std::size_t{256} << 20}) {
    void* host = std::aligned_alloc(4096, bytes);
    if (!host) return 1;
    std::memset(host, 1, bytes);
    CUdeviceptr dev;
    CMT_CHECK_CU(cuMemAlloc(&dev, bytes));
    for (bool loaded : {false, true}) {
      Times t;
      for (int r = 0; r < reps; ++r) {
        if (loaded) {
          unsigned long long ns = static_cast<unsigned long long>(spin_ms * 1e6);
          void* args[] = {&ns};
          CMT_CHECK_CU(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, busy, args, nullptr));
        }
        one_rep(host, bytes, dev, other, t);
        CMT_CHECK_CU(cuStreamSynchronize(busy));
      }
      std::printf("%-8s %-5s %10.3f %12.3f %10.3f\n", (std::to_string(bytes >> 10) + "K").c_str(),
                  loaded ? "busy" : "idle", median(t.reg), median(t.unreg), median(t.copy));
    }
    CMT_CHECK_CU(cuMemFree(dev));
    std::free(host);
  }
  if (!unregister_beside_launch(context, spin, empty, busy, other, spin_ms, reps)) return 1;
  std::printf("free() of a malloc'd buffer copied 3 times, the kernel spinning: median ms of %d\n",
              reps);
  for (std::size_t bytes : {std::size_t{256} << 10, std::size_t{16} << 20}) {
    CUdeviceptr dev;
    CMT_CHECK_CU(cuMemAlloc(&dev, bytes));
    std::vector<double> t, next;
    for (int r = 0; r < reps; ++r) {
      void* host = std::malloc(bytes);
      if (!host) return 1;
      std::memset(host, 2, bytes);
      for (int i = 0; i < 3; ++i) CMT_CHECK_CU(cuMemcpyHtoD(dev, host, bytes));
      unsigned long long ns = static_cast<unsigned long long>(spin_ms * 1e6);
      void* args[] = {&ns};
      CMT_CHECK_CU(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, busy, args, nullptr));
      const auto t0 = std::chrono::steady_clock::now();
      std::free(host);
      t.push_back(ms_since(t0));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // cmt's release thread at work
      const auto t1 = std::chrono::steady_clock::now();
      CMT_CHECK_CU(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, other, nullptr, nullptr));
      CMT_CHECK_CU(cuStreamSynchronize(other));
      next.push_back(ms_since(t1));
      CMT_CHECK_CU(cuStreamSynchronize(busy));
    }
    std::printf("%-8s free %.3f ms, then a launch on another stream %.3f ms\n",
                (std::to_string(bytes >> 10) + "K").c_str(), median(t), median(next));
    CMT_CHECK_CU(cuMemFree(dev));
  }
  return 0;
}
