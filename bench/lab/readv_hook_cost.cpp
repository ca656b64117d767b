// What the readv hook costs a program that never reads a file into CUDA host memory: `readv` of
// 64 bytes from a socket, the case where the hook asks the host leg, which pays an fstat to see
// that the descriptor is no regular file (interposer/host_leg.h's take_readv), against `read` of
// the same, which the hook passes to libc after one compare. The host leg is armed first by one
// cuMemAllocHost (the fake libcuda's on a CPU machine, the driver's on a GPU one), as a CUDA
// program's first call arms it. Prints ns per write + read pair, each way.
//
// usage: readv_hook_cost CALLS   (bench/lab/readv_hook_cost.sh runs it with and without cmt)
#include <cuda.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

double ns_per_pair(int calls, bool vectored, const int fds[2]) {
  char out[64] = {1}, in[64];
  iovec segment{in, sizeof(in)};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    if (write(fds[0], out, sizeof(out)) != sizeof(out)) std::abort();
    const ssize_t got = vectored ? readv(fds[1], &segment, 1) : read(fds[1], in, sizeof(in));
    if (got != sizeof(in)) std::abort();
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
         calls;
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 1000000;
  CUdevice device = 0;
  CUcontext context = nullptr;
  void* pinned = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS || cuMemAllocHost(&pinned, 1 << 20) != CUDA_SUCCESS)
    return 77;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 2;
  ns_per_pair(calls / 10, true, fds);  // warm up
  const double plain = ns_per_pair(calls, false, fds);
  const double vectored = ns_per_pair(calls, true, fds);
  std::printf("{\"read_ns\": %.1f, \"readv_ns\": %.1f}\n", plain, vectored);
  return 0;
}
