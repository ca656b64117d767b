// The engine against a real GPU: the same byte-exact matrix as the CPU tests, with CUDA's own
// copies as the reference, several streams and threads. Skips where there is no GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cuda/driver_api.h"
#include "engine/copy_engine.h"
#include "interposer/classify.h"

namespace cmt {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  std::mt19937_64 rng(seed);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t x = rng();
    std::memcpy(&v[i], &x, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<unsigned char>(rng());
  return v;
}

class GpuEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // make the primary context current
    driver_ = real_driver();
    ASSERT_NE(driver_, nullptr);
    Config c;
    c.threshold = 0;
    engine_ = std::make_unique<CopyEngine>(*driver_, c);
  }
  const DriverApi* driver_ = nullptr;
  std::unique_ptr<CopyEngine> engine_;
};

TEST_F(GpuEngine, ByteExactMatrixAgainstCuda) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const std::size_t sizes[] = {
      1, 4095, 65537, (1u << 20) + 3, (16u << 20) + 1, (64u << 20) - 5, 256u << 20};
  const std::size_t offsets[] = {0, 1, 7};
  unsigned seed = 1;
  for (std::size_t bytes : sizes) {
    for (std::size_t off : offsets) {
      for (CUstream s :
           {CU_STREAM_LEGACY, reinterpret_cast<CUstream>(stream), CU_STREAM_PER_THREAD}) {
        SCOPED_TRACE(testing::Message() << "bytes=" << bytes << " off=" << off);
        auto src = pattern(bytes + off, seed++);
        char* dev = nullptr;
        ASSERT_EQ(cudaMalloc(&dev, bytes + 64), cudaSuccess);
        ASSERT_EQ(cudaMemset(dev, 0, bytes + 64), cudaSuccess);
        CopyOutcome up = engine_->copy({Direction::HostToDevice, src.data() + off,
                                        reinterpret_cast<CUdeviceptr>(dev + off), bytes, s, true});
        ASSERT_EQ(up.status, CUDA_SUCCESS);
        ASSERT_EQ(up.bytes_done, bytes);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<unsigned char> check(bytes);
        ASSERT_EQ(cudaMemcpy(check.data(), dev + off, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(0, std::memcmp(check.data(), src.data() + off, bytes)) << "H2D bytes differ";

        std::vector<unsigned char> back(bytes + off + 8, 0xEE);
        CopyOutcome down =
            engine_->copy({Direction::DeviceToHost, back.data() + off,
                           reinterpret_cast<CUdeviceptr>(dev + off), bytes, s, false});
        ASSERT_EQ(down.status, CUDA_SUCCESS);
        ASSERT_EQ(down.bytes_done, bytes);
        ASSERT_EQ(0, std::memcmp(back.data() + off, src.data() + off, bytes)) << "D2H bytes differ";
        for (std::size_t i = 0; i < off; ++i) ASSERT_EQ(back[i], 0xEE);
        for (std::size_t i = off + bytes; i < back.size(); ++i) ASSERT_EQ(back[i], 0xEE);
        ASSERT_EQ(cudaFree(dev), cudaSuccess);
      }
    }
  }
  cudaStreamDestroy(stream);
}

// Device to host into memory never written before (as tensor.cpu() copies into a new tensor),
// each way of preparing it: every byte arrives and the rest of the mapping stays zero.
TEST_F(GpuEngine, FreshDestinationsEachWay) {
  const std::size_t sizes[] = {(8u << 20) + 3, (64u << 20) - 5, (256u << 20) + 4097};
  unsigned seed = 100;
  for (FreshPages mode : {FreshPages::Off, FreshPages::Populate, FreshPages::Huge}) {
    Config c;
    c.threshold = 0;
    c.fresh_pages = mode;
    CopyEngine engine(*driver_, c);
    for (std::size_t bytes : sizes) {
      for (std::size_t off : {std::size_t{0}, std::size_t{4095}}) {
        SCOPED_TRACE(testing::Message()
                     << fresh_pages_name(mode) << " bytes=" << bytes << " off=" << off);
        auto src = pattern(bytes, seed++);
        char* dev = nullptr;
        ASSERT_EQ(cudaMalloc(&dev, bytes), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dev, src.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
        const std::size_t mapped = bytes + off + 8192;
        void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(p, MAP_FAILED);
        auto* host = static_cast<unsigned char*>(p);
        CopyOutcome down =
            engine.copy({Direction::DeviceToHost, host + off, reinterpret_cast<CUdeviceptr>(dev),
                         bytes, CU_STREAM_LEGACY, true});
        ASSERT_EQ(down.status, CUDA_SUCCESS);
        ASSERT_EQ(down.bytes_done, bytes);
        ASSERT_EQ(0, std::memcmp(host + off, src.data(), bytes)) << "D2H bytes differ";
        for (std::size_t i = 0; i < off; ++i) ASSERT_EQ(host[i], 0);
        for (std::size_t i = off + bytes; i < mapped; ++i) ASSERT_EQ(host[i], 0);
        munmap(p, mapped);
        ASSERT_EQ(cudaFree(dev), cudaSuccess);
      }
    }
  }
}

TEST_F(GpuEngine, ManyThreadsSeveralStreamsEveryGpu) {
  const int kThreads = 8;
  int gpus = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      cudaSetDevice(t % gpus);  // one engine, a lane per GPU context
      cudaFree(nullptr);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      for (int rep = 0; rep < 4; ++rep) {
        std::size_t bytes = (8u << 20) + t * 4097 + rep;
        auto src = pattern(bytes, 1000 + t * 10 + rep);
        char* dev = nullptr;
        if (cudaMalloc(&dev, bytes) != cudaSuccess) {
          ++bad;
          return;
        }
        std::size_t done =
            engine_
                ->copy({Direction::HostToDevice, src.data(), reinterpret_cast<CUdeviceptr>(dev),
                        bytes, reinterpret_cast<CUstream>(s), false})
                .bytes_done;
        if (done < bytes)  // the engine may decline when another thread holds the lane
          cudaMemcpyAsync(dev + done, src.data() + done, bytes - done, cudaMemcpyHostToDevice, s);
        std::vector<unsigned char> back(bytes);
        done = engine_
                   ->copy({Direction::DeviceToHost, back.data(), reinterpret_cast<CUdeviceptr>(dev),
                           bytes, reinterpret_cast<CUstream>(s), false})
                   .bytes_done;
        if (done < bytes)
          cudaMemcpyAsync(back.data() + done, dev + done, bytes - done, cudaMemcpyDeviceToHost, s);
        cudaStreamSynchronize(s);
        if (std::memcmp(back.data(), src.data(), bytes) != 0) ++bad;
        cudaFree(dev);
      }
      cudaStreamDestroy(s);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(GpuEngine, ClassifiesRealPointers) {
  const std::size_t n = 4u << 20;
  std::vector<char> pageable(n);
  void* pinned = nullptr;
  void* managed = nullptr;
  char* dev = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, n), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(&managed, n), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dev, n), cudaSuccess);
  auto why = [&](void* dst, const void* src, int kind) {
    return classify_copy(*driver_, dst, src, n, kind, CU_STREAM_LEGACY, {1, 1}).reason;
  };
  EXPECT_EQ(why(dev, pageable.data(), kHostToDevice), ForwardReason::Taken);
  EXPECT_EQ(why(pageable.data(), dev, kDefault), ForwardReason::Taken);
  EXPECT_EQ(why(dev, pinned, kHostToDevice), ForwardReason::PinnedOrManaged);
  EXPECT_EQ(why(dev, managed, kDefault), ForwardReason::PinnedOrManaged);
  EXPECT_EQ(why(managed, pageable.data(), kDefault), ForwardReason::PinnedOrManaged);
  EXPECT_EQ(why(dev + 1, pageable.data(), kHostToDevice), ForwardReason::OutOfRange);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(classify_copy(*driver_, dev, pageable.data(), n, kHostToDevice,
                          reinterpret_cast<CUstream>(s), {1, 1})
                .reason,
            ForwardReason::Capturing);
  cudaStreamEndCapture(s, &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cudaFreeHost(pinned);
  cudaFree(managed);
  cudaFree(dev);
}

}  // namespace
}  // namespace cmt
