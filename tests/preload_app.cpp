// A plain CUDA program that copies pageable memory through cudaMemcpy, cudaMemcpyAsync and
// cudaMemcpyBatchAsync (which cudart makes through cuMemcpyBatchAsync, so its copies are taken
// through the batch hook whichever way cudart is linked), from
// several threads on every GPU, and checks every byte. It is built four ways: dynamic or static
// cudart (nvcc's default), each with the legacy or the per-thread default stream
// (CUDA_API_PER_THREAD_DEFAULT_STREAM, as nvcc --default-stream per-thread). Run under
// LD_PRELOAD by preload_app.sh, which then reads cmt's statistics to prove which hooks took the
// copies. It also copies device to device through every runtime entry (cudaMemcpyPeer(Async),
// cudaMemcpy(Async)): between two GPUs without peer access where there are two (cmt takes them
// through the host), else within the one GPU (cmt forwards them); it prints how many of each it
// made, of at least 256 KiB, for the script to match against cmt's statistics.
// Exit status: 0 all bytes right, 1 a wrong byte or CUDA error, 77 no GPU.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

int g_failures = 0;
// Device-to-device calls of at least 256 KiB (cmt's peer_threshold): within one GPU, and between two.
int g_same_gpu_calls = 0, g_cross_gpu_calls = 0;

void count_d2d(int from, int to) {
  __atomic_add_fetch(from == to ? &g_same_gpu_calls : &g_cross_gpu_calls, 1, __ATOMIC_RELAXED);
}

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

// libcmt.so is loaded and not disabled.
bool cmt_runs() {
  static const bool runs = dlsym(RTLD_DEFAULT, "cmt_forward_this_thread") != nullptr &&
                           std::getenv("CMT_DISABLE") == nullptr;
  return runs;
}

// `n` bytes from `src` to `dst` as one cudaMemcpyBatchAsync on `stream`, in three parts, with a
// 1000-byte copy from `small_src` to `small_dst` beside them (cmt leaves that one to CUDA). The
// first part's source is read in stream order, the others' by `rest_order`.
cudaError_t batch_copy(void* dst, const void* src, size_t n, void* small_dst, const void* small_src,
                       cudaMemcpySrcAccessOrder rest_order, cudaStream_t stream) {
  void* dsts[4];
  const void* srcs[4];
  size_t sizes[4];
  const size_t part = n / 3;
  for (int i = 0; i < 3; ++i) {
    dsts[i] = static_cast<char*>(dst) + i * part;
    srcs[i] = static_cast<const char*>(src) + i * part;
    sizes[i] = i < 2 ? part : n - 2 * part;
  }
  dsts[3] = small_dst;
  srcs[3] = small_src;
  sizes[3] = 1000;
  cudaMemcpyAttributes attrs[2] = {};
  attrs[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attrs[1].srcAccessOrder = rest_order;
  size_t first[2] = {0, 1};
  return cudaMemcpyBatchAsync(dsts, srcs, sizes, 4, attrs, first, 2, stream);
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
    // cudaMemcpyBatchAsync up, the sources of the parts read "during the call" overwritten as soon
    // as it returns where cmt runs (the API's promise, which cmt keeps: it has staged a source
    // before it returns; CUDA's own path, driver 580, was seen reading such sources later, so not
    // under CMT_DISABLE), then back in stream order (the device memory it reads is written by the
    // batch before; "any time" would let CUDA read it first).
    fill(src, seed++);
    expect = src;
    std::vector<unsigned char> small(1000, 0x5a), small_back(1000, 0);
    char* dev_small = nullptr;
    CHECK(cudaMalloc(&dev_small, small.size()));
    CHECK(batch_copy(dev, src.data(), bytes, dev_small, small.data(),
                     cudaMemcpySrcAccessOrderDuringApiCall, stream));
    if (cmt_runs()) std::memset(src.data() + bytes / 3, 0, bytes - bytes / 3);
    std::fill(back.begin(), back.end(), 0);
    CHECK(batch_copy(back.data(), dev, bytes, small_back.data(), dev_small,
                     cudaMemcpySrcAccessOrderStream, stream));
    CHECK(cudaStreamSynchronize(stream));
    expect_same(back.data(), expect.data(), bytes, "cudaMemcpyBatchAsync", bytes);
    expect_same(small_back.data(), small.data(), small.size(), "cudaMemcpyBatchAsync (1000 B)",
                bytes);
    // Up again with the parts' sources read "any time" (host memory no work on the stream
    // touches), kept until the stream is done, and back.
    fill(src, seed++);
    CHECK(batch_copy(dev, src.data(), bytes, dev_small, small.data(), cudaMemcpySrcAccessOrderAny,
                     stream));
    std::fill(back.begin(), back.end(), 0);
    CHECK(batch_copy(back.data(), dev, bytes, small_back.data(), dev_small,
                     cudaMemcpySrcAccessOrderStream, stream));
    CHECK(cudaStreamSynchronize(stream));
    expect_same(back.data(), src.data(), bytes, "cudaMemcpyBatchAsync (any time)", bytes);
    CHECK(cudaFree(dev_small));
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
    count_d2d(device, device);
    CHECK(cudaMemcpyAsync(back.data(), dev2, bytes, cudaMemcpyDeviceToHost, 0));
    CHECK(cudaStreamSynchronize(0));
    expect_same(back.data(), expect.data(), bytes, "default-stream ordering", bytes);
    std::fill(back.begin(), back.end(), 0);
  }
  CHECK(cudaFree(dev));
  CHECK(cudaFree(dev2));
}

// GPU `from` to GPU `to` (the same one where there is only one), peer access left as CUDA starts
// it (off), at odd sizes and offsets, through each runtime entry point; every byte checked.
void gpu_to_gpu(unsigned seed, int from, int to) {
  const size_t sizes[] = {(1u << 20) + 5, (8u << 20) - 3, 40u << 20};
  cudaStream_t stream;
  CHECK(cudaSetDevice(from));
  CHECK(cudaStreamCreate(&stream));
  for (size_t bytes : sizes) {
    std::vector<unsigned char> want(bytes), back(bytes);
    char *src = nullptr, *dst = nullptr;
    CHECK(cudaSetDevice(to));
    CHECK(cudaMalloc(&dst, bytes + 8));
    CHECK(cudaSetDevice(from));
    CHECK(cudaMalloc(&src, bytes + 8));
    // Each entry: the source filled from fresh bytes first (on the copy's stream where it has
    // one, so the order of two taken copies on one stream is checked too), then back to the host.
    auto one = [&](const char* what, auto&& copy, bool on_stream) {
      fill(want, seed++);
      if (on_stream)
        CHECK(cudaMemcpyAsync(src + 3, want.data(), bytes, cudaMemcpyHostToDevice, stream));
      else
        CHECK(cudaMemcpy(src + 3, want.data(), bytes, cudaMemcpyHostToDevice));
      CHECK(copy());
      count_d2d(from, to);
      CHECK(cudaStreamSynchronize(stream));
      CHECK(cudaSetDevice(to));
      CHECK(cudaMemcpy(back.data(), dst + 1, bytes, cudaMemcpyDeviceToHost));
      CHECK(cudaSetDevice(from));
      expect_same(back.data(), want.data(), bytes, what, bytes);
    };
    one("cudaMemcpyPeer", [&] { return cudaMemcpyPeer(dst + 1, to, src + 3, from, bytes); }, false);
    one("cudaMemcpyPeerAsync", [&] {
      return cudaMemcpyPeerAsync(dst + 1, to, src + 3, from, bytes, stream);
    }, true);
    one("cudaMemcpy(Default) device to device",
        [&] { return cudaMemcpy(dst + 1, src + 3, bytes, cudaMemcpyDefault); }, false);
    one("cudaMemcpyAsync(DeviceToDevice)", [&] {
      return cudaMemcpyAsync(dst + 1, src + 3, bytes, cudaMemcpyDeviceToDevice, stream);
    }, true);
    CHECK(cudaFree(src));
    CHECK(cudaSetDevice(to));
    CHECK(cudaFree(dst));
    CHECK(cudaSetDevice(from));
  }
  CHECK(cudaStreamDestroy(stream));
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
  // Device to device: 0 -> 1 and 1 -> 0 where there are two GPUs, within GPU 0 where there is one;
  // then four threads at once.
  const int other = n > 1 ? 1 : 0;
  gpu_to_gpu(5000, 0, other);
  gpu_to_gpu(6000, other, 0);
  threads.clear();
  for (unsigned t = 0; t < 4; ++t)
    threads.emplace_back([t, other] {
      gpu_to_gpu(7000 + 100 * t, t % 2 ? other : 0, t % 2 ? 0 : other);
    });
  for (auto& t : threads) t.join();
  std::printf("device-to-device calls of 256 KiB or more: %d within one GPU, %d between two\n",
              g_same_gpu_calls, g_cross_gpu_calls);
  std::printf("%d GPU(s), 8 threads: ", n);
  std::printf("%s\n", g_failures ? "FAILED" : "all bytes right");
  return g_failures ? 1 : 0;
}
