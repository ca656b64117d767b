// A plain CUDA program that copies pageable memory through cudaMemcpy and cudaMemcpyAsync, from
// several threads on every GPU, and checks every byte. It is built four ways: dynamic or static
// cudart (nvcc's default), each with the legacy or the per-thread default stream
// (CUDA_API_PER_THREAD_DEFAULT_STREAM, as nvcc --default-stream per-thread). Run under
// LD_PRELOAD by preload_app.sh, which then reads cmt's statistics to prove which hooks took the
// copies. Exit status: 0 all bytes right, 1 a wrong byte or CUDA error, 77 no GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

int g_failures = 0;

#define CHECK(x)                                                                                 \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      __atomic_add_fetch(&g_failures, 1, __ATOMIC_RELAXED);                                      \
      return;                                                                                    \
    }                                                                                            \
  } while (0)

void fill(std::vector<unsigned char>& v, unsigned seed) {
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
}

void expect_same(const void* a, const void* b, size_t n, const char* what, size_t bytes) {
  if (std::memcmp(a, b, n) != 0) {
    std::fprintf(stderr, "wrong bytes: %s, %zu bytes\n", what, bytes);
    __atomic_add_fetch(&g_failures, 1, __ATOMIC_RELAXED);
  }
}

void round_trips(unsigned seed, int device) {
  CHECK(cudaSetDevice(device));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  const size_t sizes[] = {1000, (4u << 20) + 1, (32u << 20) - 3, 96u << 20};
  for (size_t bytes : sizes) {
    std::vector<unsigned char> src(bytes + 1), back(bytes + 1), expect;
    fill(src, seed++);
    expect = src;
    char* dev = nullptr;
    CHECK(cudaMalloc(&dev, bytes + 1));
    // cudaMemcpy H2D, then the source is overwritten at once: the copy must not see it.
    CHECK(cudaMemcpy(dev, src.data() + 1, bytes, cudaMemcpyHostToDevice));
    std::memset(src.data(), 0, src.size());
    CHECK(cudaMemcpy(back.data() + 1, dev, bytes, cudaMemcpyDeviceToHost));
    expect_same(back.data() + 1, expect.data() + 1, bytes, "cudaMemcpy", bytes);
    // cudaMemcpyAsync on a stream, with cudaMemcpyDefault.
    fill(src, seed++);
    CHECK(cudaMemcpyAsync(dev, src.data(), bytes, cudaMemcpyDefault, stream));
    std::fill(back.begin(), back.end(), 0);
    CHECK(cudaMemcpyAsync(back.data(), dev, bytes, cudaMemcpyDefault, stream));
    expect_same(back.data(), src.data(), bytes, "cudaMemcpyAsync(stream)", bytes);
    // cudaMemcpyAsync on the NULL (legacy) stream.
    fill(src, seed++);
    CHECK(cudaMemcpyAsync(dev, src.data(), bytes, cudaMemcpyHostToDevice, 0));
    CHECK(cudaMemcpyAsync(back.data(), dev, bytes, cudaMemcpyDeviceToHost, 0));
    CHECK(cudaStreamSynchronize(0));
    expect_same(back.data(), src.data(), bytes, "cudaMemcpyAsync(0)", bytes);
    CHECK(cudaFree(dev));
  }
  CHECK(cudaStreamDestroy(stream));
}

// Ordering on the default stream (legacy or this thread's, as built): two host-to-device copies
// into overlapping ranges, a device-to-device copy that cmt forwards, then a device-to-host copy,
// all asynchronous. The result must show the later write on top of the earlier one.
void default_stream_order(unsigned seed, int device) {
  CHECK(cudaSetDevice(device));
  const size_t bytes = (32u << 20) - 3, quarter = bytes / 4, half = bytes / 2;
  std::vector<unsigned char> a(bytes), b(half), back(bytes, 0);
  fill(a, seed);
  fill(b, seed + 1);
  std::vector<unsigned char> expect = a;
  std::copy(b.begin(), b.end(), expect.begin() + quarter);
  char *dev = nullptr, *dev2 = nullptr;
  CHECK(cudaMalloc(&dev, bytes));
  CHECK(cudaMalloc(&dev2, bytes));
  for (int round = 0; round < 3; ++round) {
    CHECK(cudaMemcpyAsync(dev, a.data(), bytes, cudaMemcpyHostToDevice, 0));
    CHECK(cudaMemcpyAsync(dev + quarter, b.data(), half, cudaMemcpyHostToDevice, 0));
    CHECK(cudaMemcpyAsync(dev2, dev, bytes, cudaMemcpyDeviceToDevice, 0));
    CHECK(cudaMemcpyAsync(back.data(), dev2, bytes, cudaMemcpyDeviceToHost, 0));
    CHECK(cudaStreamSynchronize(0));
    expect_same(back.data(), expect.data(), bytes, "default-stream ordering", bytes);
    std::fill(back.begin(), back.end(), 0);
  }
  CHECK(cudaFree(dev));
  CHECK(cudaFree(dev2));
}

}  // namespace

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA GPU: skipped\n");
    return 77;
  }
  round_trips(1, 0);
  default_stream_order(7, 0);
  // Eight threads at once, spread over every GPU.
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 8; ++t)
    threads.emplace_back([t, n] {
      round_trips(100 * (t + 1), static_cast<int>(t) % n);
      default_stream_order(1000 * (t + 1), static_cast<int>(t) % n);
    });
  for (auto& t : threads) t.join();
  std::printf("%d GPU(s), 8 threads: ", n);
  std::printf("%s\n", g_failures ? "FAILED" : "all bytes right");
  return g_failures ? 1 : 0;
}
