// A program that uses the CUDA driver API alone and copies pageable memory through each 64-bit
// copy entry point cmt hooks, reached three ways: linked against libcuda (cuda.h maps the names
// to their _v2 variants), through cuGetProcAddress with the legacy and the per-thread
// default-stream flags (which return the _ptds/_ptsz variants), and through dlopen + dlsym.
// Prints how many copies were big enough for cmt to take; driver_app.sh checks cmt's statistics
// against it. Exit status: 0 all bytes right, 1 a wrong byte or a CUDA error, 77 no GPU.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

int g_failures = 0;
int g_large_copies = 0;

bool ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "%s -> %s\n", what, name ? name : "?");
  ++g_failures;
  return false;
}

void fill(std::vector<unsigned char>& v, unsigned seed) {
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
}

struct Copies {
  const char* how;
  CUresult (*htod)(CUdeviceptr, const void*, size_t);
  CUresult (*dtoh)(void*, CUdeviceptr, size_t);
  CUresult (*htod_async)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*dtoh_async)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*any)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*any_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
};

// Round trips through every function of `c`, at a size cmt takes and one it leaves to CUDA, on
// the default stream and on a stream of its own. Every byte is checked.
void round_trips(const Copies& c, CUdeviceptr dev, CUstream stream, unsigned seed) {
  for (size_t bytes : {size_t{(24u << 20) + 7}, size_t{1000}}) {
    const bool large = bytes >= (2u << 20);
    std::vector<unsigned char> src(bytes), back(bytes);
    auto check = [&](const char* what) {
      if (std::memcmp(src.data(), back.data(), bytes) != 0) {
        std::fprintf(stderr, "wrong bytes: %s %s, %zu bytes\n", c.how, what, bytes);
        ++g_failures;
      }
      std::fill(back.begin(), back.end(), 0);
      fill(src, ++seed);
    };
    fill(src, seed);
    if (ok(c.htod(dev, src.data(), bytes), "HtoD") && ok(c.dtoh(back.data(), dev, bytes), "DtoH"))
      check("HtoD/DtoH");
    if (ok(c.htod_async(dev, src.data(), bytes, stream), "HtoDAsync") &&
        ok(c.dtoh_async(back.data(), dev, bytes, stream), "DtoHAsync") &&
        ok(cuStreamSynchronize(stream), "sync"))
      check("HtoDAsync/DtoHAsync");
    if (ok(c.htod_async(dev, src.data(), bytes, nullptr), "HtoDAsync(0)") &&
        ok(c.dtoh_async(back.data(), dev, bytes, nullptr), "DtoHAsync(0)") &&
        ok(cuCtxSynchronize(), "sync"))
      check("HtoDAsync/DtoHAsync on stream 0");
    auto host = [](std::vector<unsigned char>& v) {
      return reinterpret_cast<CUdeviceptr>(v.data());
    };
    if (ok(c.any(dev, host(src), bytes), "cuMemcpy") &&
        ok(c.any(host(back), dev, bytes), "cuMemcpy"))
      check("cuMemcpy");
    if (ok(c.any_async(dev, host(src), bytes, stream), "cuMemcpyAsync") &&
        ok(c.any_async(host(back), dev, bytes, stream), "cuMemcpyAsync") &&
        ok(cuStreamSynchronize(stream), "sync"))
      check("cuMemcpyAsync");
    if (large) g_large_copies += 10;
  }
}

template <typename Fn>
void get(const char* name, Fn* out, cuuint64_t flags) {
  CUdriverProcAddressQueryResult status{};
  void* fn = nullptr;
  if (cuGetProcAddress(name, &fn, CUDA_VERSION, flags, &status) != CUDA_SUCCESS || !fn) {
    std::fprintf(stderr, "cuGetProcAddress(%s) failed\n", name);
    ++g_failures;
  }
  *out = reinterpret_cast<Fn>(fn);
}

Copies through_get_proc_address(cuuint64_t flags, const char* how) {
  Copies c{how, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  get("cuMemcpyHtoD", &c.htod, flags);
  get("cuMemcpyDtoH", &c.dtoh, flags);
  get("cuMemcpyHtoDAsync", &c.htod_async, flags);
  get("cuMemcpyDtoHAsync", &c.dtoh_async, flags);
  get("cuMemcpy", &c.any, flags);
  get("cuMemcpyAsync", &c.any_async, flags);
  return c;
}

template <typename Fn>
void look_up(void* lib, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*out) {
    std::fprintf(stderr, "dlsym(%s) failed\n", name);
    ++g_failures;
  }
}

}  // namespace

int main() {
  int count = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    std::printf("no CUDA GPU: skipped\n");
    return 77;
  }
  CUdevice device;
  CUcontext ctx;
  CUdeviceptr dev;
  CUstream stream;
  if (!ok(cuDeviceGet(&device, 0), "cuDeviceGet") ||
      !ok(cuDevicePrimaryCtxRetain(&ctx, device), "retain") || !ok(cuCtxSetCurrent(ctx), "set") ||
      !ok(cuMemAlloc(&dev, 32u << 20), "cuMemAlloc") ||
      !ok(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return 1;

  round_trips({"linked", cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpy,
               cuMemcpyAsync},
              dev, stream, 1);
  round_trips(through_get_proc_address(CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuGetProcAddress"), dev,
              stream, 100);
  round_trips(through_get_proc_address(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                                       "cuGetProcAddress per-thread"),
              dev, stream, 200);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  Copies via_dlsym{"dlsym", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  look_up(lib, "cuMemcpyHtoD_v2_ptds", &via_dlsym.htod);
  look_up(lib, "cuMemcpyDtoH_v2", &via_dlsym.dtoh);
  look_up(lib, "cuMemcpyHtoDAsync_v2_ptsz", &via_dlsym.htod_async);
  look_up(lib, "cuMemcpyDtoHAsync_v2", &via_dlsym.dtoh_async);
  look_up(lib, "cuMemcpy_ptds", &via_dlsym.any);
  look_up(lib, "cuMemcpyAsync_ptsz", &via_dlsym.any_async);
  if (g_failures == 0) round_trips(via_dlsym, dev, stream, 300);

  std::printf("large copies: %d\n", g_large_copies);
  std::printf("%s\n", g_failures ? "FAILED" : "all bytes right");
  return g_failures ? 1 : 0;
}
