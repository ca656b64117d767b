// The engine against a real GPU: the same byte-exact matrix as the CPU tests, with CUDA's own
// copies as the reference, several streams and threads. Skips where there is no GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cuda/driver_api.h"
#include "engine/device/copy_engine.h"
#include "engine/peer/peer_copier.h"
#include "interposer/classify.h"
#include "pickers.h"
#include "search.h"

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
                     << choice_name(mode) << " bytes=" << bytes << " off=" << off);
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

// The path through the host between two contexts of this one GPU (a second context stands in
// for a second GPU: its own streams, its own memory, events waited on across contexts, the slots
// pinned for both): bytes exact, on a user stream, the legacy stream and synchronously.
// A second context on the current GPU, made through the runtime's entry-point query (the test
// does not link libcuda): cuCtxCreate as of this toolkit's headers, its _v4 form with a (null)
// parameter block. The current context is left as it was. nullptr if it could not be made.
CUcontext second_context(const DriverApi& d) {
  using CtxCreateFn = CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned, CUdevice);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUcontext before = nullptr, made = nullptr;
  CUdevice dev = 0;
  if (cudaGetDriverEntryPointByVersion("cuCtxCreate", &fn, CUDA_VERSION, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      !fn || d.ctx_get_current(&before) != CUDA_SUCCESS || d.ctx_get_device(&dev) != CUDA_SUCCESS ||
      reinterpret_cast<CtxCreateFn>(fn)(&made, nullptr, 0, dev) != CUDA_SUCCESS)
    return nullptr;
  d.ctx_set_current(before);
  return made;
}

// The engine in a context that is not the primary one (a driver-API program's own): its lanes
// are per context, its DMAs on that context's streams; bytes exact both ways.
TEST_F(GpuEngine, CopiesInASecondContext) {
  const DriverApi& d = *driver_;
  CUcontext primary = nullptr;
  ASSERT_EQ(d.ctx_get_current(&primary), CUDA_SUCCESS);
  CUcontext other = second_context(d);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(d.ctx_set_current(other), CUDA_SUCCESS);
  const std::size_t bytes = (24u << 20) + 7;
  CUdeviceptr dev = 0;
  ASSERT_EQ(d.mem_alloc(&dev, bytes), CUDA_SUCCESS);
  auto src = pattern(bytes, 77);
  std::vector<unsigned char> back(bytes, 0xEE);
  for (CUstream s : {CU_STREAM_LEGACY, CU_STREAM_PER_THREAD}) {
    CopyOutcome up = engine_->copy({Direction::HostToDevice, src.data(), dev, bytes, s, true});
    ASSERT_EQ(up.bytes_done, bytes);
    CopyOutcome down = engine_->copy({Direction::DeviceToHost, back.data(), dev, bytes, s, false});
    ASSERT_EQ(down.bytes_done, bytes);
    EXPECT_EQ(0, std::memcmp(back.data(), src.data(), bytes));
  }
  bool in_other = false;
  for (const LaneInfo& lane : engine_->lanes()) in_other = in_other || lane.ctx == other;
  EXPECT_TRUE(in_other);
  d.mem_free(dev);
  ASSERT_EQ(d.ctx_set_current(primary), CUDA_SUCCESS);
}

TEST_F(GpuEngine, PeerCopierBetweenTwoContextsIsByteExact) {
  const DriverApi& d = *driver_;
  CUcontext primary = nullptr;
  ASSERT_EQ(d.ctx_get_current(&primary), CUDA_SUCCESS);
  CUcontext other = second_context(d);
  ASSERT_NE(other, nullptr);
  const std::size_t cap = (64u << 20) + 4096;
  const std::vector<unsigned char> zeros(cap, 0);
  CUdeviceptr src = 0, dst = 0;
  ASSERT_EQ(d.mem_alloc(&src, cap), CUDA_SUCCESS);  // the primary context's
  ASSERT_EQ(d.ctx_set_current(other), CUDA_SUCCESS);
  ASSERT_EQ(d.mem_alloc(&dst, cap), CUDA_SUCCESS);  // the other's
  ASSERT_EQ(d.ctx_set_current(primary), CUDA_SUCCESS);
  // A device pointer's own context reaches it: the access query peer copies rely on answers.
  {
    unsigned flags = 0;
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_ACCESS_FLAGS;
    void* data = &flags;
    ASSERT_EQ(d.pointer_get_attributes(1, &attr, &data, src), CUDA_SUCCESS);
    EXPECT_EQ(flags, unsigned{CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE});
  }
  cudaStream_t user;
  ASSERT_EQ(cudaStreamCreate(&user), cudaSuccess);
  PeerCopier copier(*driver_);
  unsigned seed = 40;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4097}, (std::size_t{1} << 20) + 3,
                            (std::size_t{64} << 20) + 5}) {
    for (int mode = 0; mode < 3; ++mode) {  // user stream, legacy stream, synchronous
      SCOPED_TRACE(testing::Message() << "bytes=" << bytes << " mode=" << mode);
      const std::size_t off = seed % 7;
      auto want = pattern(bytes, seed++);
      ASSERT_EQ(d.memcpy_htod(src + off, want.data(), bytes), CUDA_SUCCESS);
      ASSERT_EQ(d.ctx_set_current(other), CUDA_SUCCESS);
      ASSERT_EQ(d.memcpy_htod(dst, zeros.data(), cap), CUDA_SUCCESS);
      ASSERT_EQ(d.ctx_synchronize(), CUDA_SUCCESS);
      ASSERT_EQ(d.ctx_set_current(primary), CUDA_SUCCESS);
      PeerRequest r;
      r.dst = dst + 3;
      r.dst_ctx = other;
      r.src = src + off;
      r.src_ctx = primary;
      r.bytes = bytes;
      r.stream = mode == 0 ? reinterpret_cast<CUstream>(user) : CU_STREAM_LEGACY;
      r.stream_ctx = primary;
      r.synchronous = mode == 2;
      PeerOutcome out = copier.copy(r);
      ASSERT_EQ(out.status, CUDA_SUCCESS);
      ASSERT_EQ(out.bytes_done, bytes);
      CUcontext now = nullptr;
      ASSERT_EQ(d.ctx_get_current(&now), CUDA_SUCCESS);
      EXPECT_EQ(now, primary);  // the caller's context is left current
      std::vector<unsigned char> got(bytes);
      // Read back on the copy's own stream (the user's or the legacy one), after it; the
      // synchronous copy has finished already and is read on another stream.
      cudaStream_t read_on = mode == 0 ? user : mode == 1 ? cudaStreamLegacy : nullptr;
      cudaStream_t other_stream = nullptr;
      if (mode == 2) {
        ASSERT_EQ(cudaStreamCreateWithFlags(&other_stream, cudaStreamNonBlocking), cudaSuccess);
      }
      ASSERT_EQ(cudaMemcpyAsync(got.data(), reinterpret_cast<void*>(dst + 3), bytes,
                                cudaMemcpyDeviceToHost, mode == 2 ? other_stream : read_on),
                cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(mode == 2 ? other_stream : read_on), cudaSuccess);
      if (other_stream) cudaStreamDestroy(other_stream);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), bytes));
    }
  }
  // What the path runs at here (two contexts of one GPU: both DMAs on its one link, so this
  // shows the pipeline, not what two GPUs get; cmt bench p2p measures that).
  const std::size_t big = 64u << 20;
  PeerRequest r;
  r.dst = dst;
  r.dst_ctx = other;
  r.src = src;
  r.src_ctx = primary;
  r.bytes = big;
  r.stream = CU_STREAM_LEGACY;
  r.stream_ctx = primary;
  r.synchronous = true;
  ASSERT_EQ(copier.copy(r).bytes_done, big);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(copier.copy(r).bytes_done, big);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("peer path between two contexts of one GPU: 64 MiB at %.1f GB/s\n",
              10.0 * big / s / 1e9);
  cudaStreamDestroy(user);
  d.mem_free(src);
  ASSERT_EQ(d.ctx_set_current(other), CUDA_SUCCESS);
  d.mem_free(dst);
  ASSERT_EQ(d.ctx_set_current(primary), CUDA_SUCCESS);
}

// With one GPU every device-to-device copy stays CUDA's: same GPU.
TEST_F(GpuEngine, DeviceToDeviceOnOneGpuIsForwarded) {
  char *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 1 << 20), cudaSuccess);
  PeerCall call;
  call.dst = reinterpret_cast<CUdeviceptr>(a);
  call.src = reinterpret_cast<CUdeviceptr>(b);
  call.bytes = 1 << 20;
  EXPECT_EQ(classify_peer_copy(*driver_, call, 1).reason, ForwardReason::SameGpu);
  cudaFree(a);
  cudaFree(b);
}

// cmt tune's gpu_cores measurement: every GPU on the tuned one's cores copying at once through
// one engine. With one GPU, the "other" is a second session on the same GPU (its own device
// buffer, the same context), which runs the same code: both settings measured, every byte
// checked.
TEST(GpuTuner, MeasuresGpusAtOnceByteExact) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  int gpus = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  std::string error;
  auto other = CudaSession::open(gpus > 1 ? 1 : 0, 128u << 20, &error);
  ASSERT_TRUE(other) << error;
  auto session = CudaSession::open(0, 256u << 20, &error);  // opened last: its context is current
  ASSERT_TRUE(session) << error;
  CopyBench bench(*session, 256u << 20);
  std::vector<std::string> notes;
  const GpuCores picked = measure_gpu_cores(bench, Config{}, {other.get()}, &notes);
  EXPECT_TRUE(bench.bytes_ok());
  ASSERT_EQ(notes.size(), 1u);
  std::printf("%s\n", notes[0].c_str());
  double all = 0, split = 0;
  const std::size_t at = notes[0].find("GB/s: all ");
  ASSERT_NE(at, std::string::npos) << notes[0];
  ASSERT_EQ(std::sscanf(notes[0].c_str() + at, "GB/s: all %lf; split %lf", &all, &split), 2);
  EXPECT_GT(all, 1.0);
  EXPECT_GT(split, 1.0);
  EXPECT_EQ(picked, pick_gpu_cores(all, split));
}

}  // namespace
}  // namespace cmt
