// Copies cmt leaves to CUDA, made through the CUDA runtime on buffers that cmt has registered as
// hot (issue 33): each round copies a pageable buffer with cudaMemcpy until cmt registers it, then
// moves rows of it with cudaMemcpy2DAsync, cudaMemcpy3DAsync, cudaMemcpy2DToArrayAsync /
// cudaMemcpy2DFromArrayAsync and cudaMemcpy2D with cudaMemcpyDefault, and checks them as copies of
// pageable memory: the source may be overwritten as soon as an asynchronous call returns, and a
// copy into the buffer has every byte there when it returns. cmt must hand such a buffer's pages
// back to CUDA first (its registration would make CUDA take them as pinned, and return early).
// Prints "copies C wrong_bytes W"; exits 1 if any byte was wrong, 77 without a GPU.
//
// usage: structured_app ROUNDS [--self-register]
//   --self-register: the program registers each buffer itself (cudaHostRegister), which makes
//   these copies asynchronous as CUDA documents: run without cmt, it shows the check can fail.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s failed: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

std::mt19937_64 rng(7);
std::uint64_t g_copies = 0, g_wrong = 0;
bool g_self_register = false;

void fill(unsigned char* p, std::size_t n) {
  std::uint64_t x = rng() | 1;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = static_cast<unsigned char>(x);
  }
}

// The rows of a copy: `rows` rows of `width` bytes, `pitch` apart in the host buffer and packed
// (`width` apart) on the GPU; `depth` slices of `rows` rows for the 3D copy.
struct Shape {
  std::size_t width, pitch, rows, depth;
  std::size_t host_bytes() const { return pitch * rows * depth; }
  std::size_t packed() const { return width * rows * depth; }
};

struct Gpu {
  unsigned char* dev = nullptr;
  unsigned char* busy = nullptr;    // 2 x kBusy bytes the stream copies first (see keep_busy)
  unsigned char* pinned = nullptr;  // what the GPU holds, read back
  cudaArray_t array = nullptr;      // 4-byte elements, kArrayWidth x kArrayRows
  cudaStream_t stream = nullptr;
};
constexpr std::size_t kArrayWidth = 1024, kArrayRows = 64, kMost = 8u << 20, kBusy = 512u << 20;

// Queues a device-to-device copy of 512 MiB ahead of the copy under test, so that its DMA starts
// well after the call returns if CUDA takes it as asynchronous: the check then fails for certain
// where the host buffer is registered (the control), instead of racing the DMA. A pageable
// copy's call waits for the stream (host to device) or for its own end (device to host).
void keep_busy(Gpu& g) {
  CHECK(cudaMemcpyAsync(g.busy + kBusy, g.busy, kBusy, cudaMemcpyDeviceToDevice, g.stream));
}

// Copies [p, p + n) to the GPU's second half until cmt has registered it (register_after = 2).
void make_hot(Gpu& g, unsigned char* p, std::size_t n) {
  for (int i = 0; i < 3; ++i) CHECK(cudaMemcpy(g.dev + kMost, p, n, cudaMemcpyHostToDevice));
}

std::uint64_t wrong_rows(const unsigned char* host, const unsigned char* packed, const Shape& s) {
  std::uint64_t wrong = 0;
  for (std::size_t r = 0; r < s.rows * s.depth; ++r)
    for (std::size_t i = 0; i < s.width; ++i)
      wrong += host[r * s.pitch + i] != packed[r * s.width + i];
  return wrong;
}

enum class Api { Copy2D, Copy2DDefault, Copy3D, Array };

// Host to GPU through `api`, the buffer overwritten at once, then the GPU's bytes checked.
void up(Gpu& g, unsigned char* buf, const Shape& s, Api api) {
  std::vector<unsigned char> want(s.host_bytes());
  fill(buf, s.host_bytes());
  std::memcpy(want.data(), buf, s.host_bytes());
  make_hot(g, buf, s.host_bytes());
  keep_busy(g);
  switch (api) {
    case Api::Copy2D:
    case Api::Copy2DDefault:
      CHECK(cudaMemcpy2DAsync(g.dev, s.width, buf, s.pitch, s.width, s.rows * s.depth,
                              api == Api::Copy2D ? cudaMemcpyHostToDevice : cudaMemcpyDefault,
                              g.stream));
      break;
    case Api::Copy3D: {
      cudaMemcpy3DParms p{};
      p.srcPtr = make_cudaPitchedPtr(buf, s.pitch, s.width, s.rows);
      p.dstPtr = make_cudaPitchedPtr(g.dev, s.width, s.width, s.rows);
      p.extent = make_cudaExtent(s.width, s.rows, s.depth);
      p.kind = cudaMemcpyHostToDevice;
      CHECK(cudaMemcpy3DAsync(&p, g.stream));
      break;
    }
    case Api::Array:
      CHECK(cudaMemcpy2DToArrayAsync(g.array, 0, 0, buf, s.pitch, s.width, s.rows * s.depth,
                                     cudaMemcpyHostToDevice, g.stream));
      break;
  }
  std::memset(buf, 0xEE, s.host_bytes());  // allowed: a pageable source is read when it returns
  CHECK(cudaStreamSynchronize(g.stream));
  if (api == Api::Array)
    CHECK(cudaMemcpy2DFromArray(g.pinned, s.width, g.array, 0, 0, s.width, s.rows * s.depth,
                                cudaMemcpyDeviceToHost));
  else
    CHECK(cudaMemcpy(g.pinned, g.dev, s.packed(), cudaMemcpyDeviceToHost));
  g_wrong += wrong_rows(want.data(), g.pinned, s);
  ++g_copies;
}

// GPU to host through `api`: every byte in the buffer when the call returns.
void down(Gpu& g, unsigned char* buf, const Shape& s, Api api) {
  fill(g.pinned, s.packed());
  if (api == Api::Array)
    CHECK(cudaMemcpy2DToArray(g.array, 0, 0, g.pinned, s.width, s.width, s.rows * s.depth,
                              cudaMemcpyHostToDevice));
  else
    CHECK(cudaMemcpy(g.dev, g.pinned, s.packed(), cudaMemcpyHostToDevice));
  std::memset(buf, 0x11, s.host_bytes());
  make_hot(g, buf, s.host_bytes());
  keep_busy(g);
  switch (api) {
    case Api::Copy2D:
    case Api::Copy2DDefault:
      CHECK(cudaMemcpy2DAsync(buf, s.pitch, g.dev, s.width, s.width, s.rows * s.depth,
                              api == Api::Copy2D ? cudaMemcpyDeviceToHost : cudaMemcpyDefault,
                              g.stream));
      break;
    case Api::Copy3D: {
      cudaMemcpy3DParms p{};
      p.srcPtr = make_cudaPitchedPtr(g.dev, s.width, s.width, s.rows);
      p.dstPtr = make_cudaPitchedPtr(buf, s.pitch, s.width, s.rows);
      p.extent = make_cudaExtent(s.width, s.rows, s.depth);
      p.kind = cudaMemcpyDeviceToHost;
      CHECK(cudaMemcpy3DAsync(&p, g.stream));
      break;
    }
    case Api::Array:
      CHECK(cudaMemcpy2DFromArrayAsync(buf, s.pitch, g.array, 0, 0, s.width, s.rows * s.depth,
                                       cudaMemcpyDeviceToHost, g.stream));
      break;
  }
  g_wrong += wrong_rows(buf, g.pinned, s);
  CHECK(cudaStreamSynchronize(g.stream));
  ++g_copies;
}

Shape pick_shape(Api api) {
  Shape s;
  if (api == Api::Array) {  // inside the array: rows of at most kArrayWidth 4-byte elements
    s.width = 4 * (kArrayWidth - rng() % 256);
    s.rows = kArrayRows - rng() % 16;
    s.depth = 1;
  } else {
    s.width = (64u << 10) + rng() % (192u << 10);
    s.rows = 2 + rng() % 14;
    s.depth = api == Api::Copy3D ? 1 + rng() % 2 : 1;
  }
  s.pitch = s.width + rng() % 8192;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ROUNDS [--self-register]\n", argv[0]);
    return 2;
  }
  const long rounds = std::atol(argv[1]);
  g_self_register = argc > 2 && std::string(argv[2]) == "--self-register";
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA GPU\n");
    return 77;
  }
  Gpu g;
  CHECK(cudaMalloc(&g.dev, 2 * kMost));
  CHECK(cudaMalloc(&g.busy, 2 * kBusy));
  CHECK(cudaMallocHost(&g.pinned, kMost));
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  CHECK(cudaMallocArray(&g.array, &desc, kArrayWidth, kArrayRows));
  CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
  for (long r = 0; r < rounds; ++r)
    for (Api api : {Api::Copy2D, Api::Copy2DDefault, Api::Copy3D, Api::Array}) {
      const Shape s = pick_shape(api);
      // A fresh buffer each time, so each is a new registration (malloc: trackable memory).
      auto* buf = static_cast<unsigned char*>(std::malloc(s.host_bytes()));
      if (!buf) return 2;
      if (g_self_register) CHECK(cudaHostRegister(buf, s.host_bytes(), cudaHostRegisterDefault));
      (rng() % 2 ? up : down)(g, buf, s, api);
      if (g_self_register) CHECK(cudaHostUnregister(buf));
      std::free(buf);
    }
  std::printf("copies %llu wrong_bytes %llu\n", static_cast<unsigned long long>(g_copies),
              static_cast<unsigned long long>(g_wrong));
  return g_wrong ? 1 : 0;
}
