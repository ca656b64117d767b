// A program whose CUDA contexts end while it runs, as C++ test suites, CUDA's samples and
// driver-API libraries make them end: cudaDeviceReset between rounds of copies, cuCtxCreate and
// cuCtxDestroy around each job, the primary context retained and released until it is gone, and
// two contexts at once of which one ends. Each round copies pageable memory both ways at sizes
// cmt takes (odd lengths, on the legacy stream and a stream of its own) and fills a pinned buffer
// with memcpy, and checks every byte. After a context ends, everything CUDA gave in it (its
// pinned memory, streams, events, registrations) is gone; a copy made after that must see none
// of it.
//
// With "unseen", the primary context is reset between rounds by the driver's own function, found
// through libc's dlsym (cmt's dlsym hook bypassed), as an end cmt's hooks cannot see: cmt must find
// it at its next copy by the context's new id (interposer/context_watch.h).
//
// usage: context_life_app reset|contexts|primary|two|unseen|probe [ROUNDS]
// Prints "round N ok, rss M MiB" per round and "large copies: K" (those at or above 2 MiB, for
// context_life.sh to hold against cmt's statistics). Exit status: 0 all bytes right and no CUDA
// error, 1 otherwise, 77 no GPU.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_failures = 0;
long g_large_copies = 0;

bool ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "%s -> %s\n", what, name ? name : "?");
  ++g_failures;
  return false;
}

bool ok(cudaError_t r, const char* what) {
  if (r == cudaSuccess) return true;
  std::fprintf(stderr, "%s -> %s\n", what, cudaGetErrorName(r));
  ++g_failures;
  return false;
}

long rss_mib() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  std::fclose(f);
  return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE) / (1 << 20);
}

// A pattern that differs by round and size, so a copy that read last round's bytes is caught.
void fill(unsigned char* p, std::size_t n, unsigned seed) {
  std::uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<unsigned char>(x);
  }
}

void check(const unsigned char* want, const unsigned char* got, std::size_t n, const char* what,
           int round) {
  if (std::memcmp(want, got, n) == 0) return;
  std::size_t i = 0;
  while (want[i] == got[i]) ++i;
  std::fprintf(stderr, "wrong bytes: round %d, %s, %zu bytes, first at %zu\n", round, what, n, i);
  ++g_failures;
}

constexpr std::size_t kSizes[] = {(3u << 20) + 1, (17u << 20) + 5, (65u << 20) + 3};
constexpr std::size_t kMost = (65u << 20) + 3;

// Pageable buffers that live across rounds, as a program's own arrays do.
struct Host {
  std::vector<unsigned char> src = std::vector<unsigned char>(kMost);
  std::vector<unsigned char> back = std::vector<unsigned char>(kMost);
};

// Runtime API round trips on the current device, then a pinned buffer filled by memcpy and sent.
void runtime_round(Host& h, int round) {
  void* dev = nullptr;
  cudaStream_t stream = nullptr;
  if (!ok(cudaMalloc(&dev, kMost), "cudaMalloc") ||
      !ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"))
    return;
  unsigned seed = static_cast<unsigned>(round) * 16;
  for (std::size_t n : kSizes) {
    fill(h.src.data(), n, ++seed);
    std::memset(h.back.data(), 0, n);
    if (ok(cudaMemcpy(dev, h.src.data(), n, cudaMemcpyHostToDevice), "cudaMemcpy H2D") &&
        ok(cudaMemcpy(h.back.data(), dev, n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H"))
      check(h.src.data(), h.back.data(), n, "cudaMemcpy", round);
    fill(h.src.data(), n, ++seed);
    std::memset(h.back.data(), 0, n);
    if (ok(cudaMemcpyAsync(dev, h.src.data(), n, cudaMemcpyHostToDevice, stream), "H2D async") &&
        ok(cudaMemcpyAsync(h.back.data(), dev, n, cudaMemcpyDeviceToHost, stream), "D2H async") &&
        ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize"))
      check(h.src.data(), h.back.data(), n, "cudaMemcpyAsync", round);
    g_large_copies += 4;
  }
  // A library's own pinned staging: memcpy into it (cmt's host leg), then a DMA from it.
  const std::size_t n = 33u << 20;
  unsigned char* pinned = nullptr;
  if (ok(cudaMallocHost(reinterpret_cast<void**>(&pinned), n), "cudaMallocHost")) {
    fill(h.src.data(), n, ++seed);
    std::memcpy(pinned, h.src.data(), n);
    std::memset(h.back.data(), 0, n);
    if (ok(cudaMemcpy(dev, pinned, n, cudaMemcpyHostToDevice), "pinned H2D") &&
        ok(cudaMemcpy(h.back.data(), dev, n, cudaMemcpyDeviceToHost), "pinned round D2H"))
      check(h.src.data(), h.back.data(), n, "through pinned memory", round);
    g_large_copies += 1;  // the D2H into pageable memory; the pinned H2D is CUDA's
    // Freed by the reset, not here, in rounds that end with one: as a program that leaves its
    // buffers to cudaDeviceReset does.
    if (round % 2 == 0) ok(cudaFreeHost(pinned), "cudaFreeHost");
  }
  if (round % 2 == 0) {
    ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
    ok(cudaFree(dev), "cudaFree");
  }
}

// Driver API round trips in the current context.
void driver_round(Host& h, int round) {
  CUdeviceptr dev = 0;
  CUstream stream = nullptr;
  if (!ok(cuMemAlloc(&dev, kMost), "cuMemAlloc") ||
      !ok(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return;
  unsigned seed = static_cast<unsigned>(round) * 16 + 7;
  for (std::size_t n : kSizes) {
    fill(h.src.data(), n, ++seed);
    std::memset(h.back.data(), 0, n);
    if (ok(cuMemcpyHtoD(dev, h.src.data(), n), "cuMemcpyHtoD") &&
        ok(cuMemcpyDtoH(h.back.data(), dev, n), "cuMemcpyDtoH"))
      check(h.src.data(), h.back.data(), n, "cuMemcpyHtoD/DtoH", round);
    fill(h.src.data(), n, ++seed);
    std::memset(h.back.data(), 0, n);
    if (ok(cuMemcpyHtoDAsync(dev, h.src.data(), n, stream), "cuMemcpyHtoDAsync") &&
        ok(cuMemcpyDtoHAsync(h.back.data(), dev, n, stream), "cuMemcpyDtoHAsync") &&
        ok(cuStreamSynchronize(stream), "cuStreamSynchronize"))
      check(h.src.data(), h.back.data(), n, "cuMemcpyHtoDAsync/DtoHAsync", round);
    g_large_copies += 4;
  }
  // Left to the context's end in odd rounds.
  if (round % 2 == 0) {
    ok(cuStreamDestroy(stream), "cuStreamDestroy");
    ok(cuMemFree(dev), "cuMemFree");
  }
}

void report(int round) {
  std::printf("round %d ok, rss %ld MiB\n", round, rss_mib());
}

int reset_rounds(int rounds) {
  Host h;
  for (int r = 0; r < rounds; ++r) {
    runtime_round(h, r);
    ok(cudaDeviceReset(), "cudaDeviceReset");
    report(r);
  }
  return 0;
}

CUdevice first_device() {
  CUdevice d = 0;
  ok(cuInit(0), "cuInit");
  ok(cuDeviceGet(&d, 0), "cuDeviceGet");
  return d;
}

int context_rounds(int rounds) {
  Host h;
  const CUdevice d = first_device();
  for (int r = 0; r < rounds; ++r) {
    CUcontext c = nullptr;
    if (!ok(cuCtxCreate(&c, nullptr, 0, d), "cuCtxCreate")) return 1;
    driver_round(h, r);
    ok(cuCtxDestroy(c), "cuCtxDestroy");
    report(r);
  }
  return 0;
}

int primary_rounds(int rounds) {
  Host h;
  const CUdevice d = first_device();
  for (int r = 0; r < rounds; ++r) {
    CUcontext c = nullptr;
    if (!ok(cuDevicePrimaryCtxRetain(&c, d), "cuDevicePrimaryCtxRetain") ||
        !ok(cuCtxSetCurrent(c), "cuCtxSetCurrent"))
      return 1;
    driver_round(h, r);
    ok(cuCtxSetCurrent(nullptr), "cuCtxSetCurrent(null)");
    ok(cuDevicePrimaryCtxRelease(d), "cuDevicePrimaryCtxRelease");
    unsigned flags = 0;
    int active = 1;
    ok(cuDevicePrimaryCtxGetState(d, &flags, &active), "cuDevicePrimaryCtxGetState");
    if (active) {
      std::fprintf(stderr, "round %d: the primary context is still active after its release\n", r);
      ++g_failures;
    }
    report(r);
  }
  return 0;
}

// Two contexts at once; one ends, the other goes on, a third comes.
int two_contexts(int rounds) {
  Host h;
  const CUdevice d = first_device();
  CUcontext a = nullptr, b = nullptr;
  if (!ok(cuCtxCreate(&a, nullptr, 0, d), "cuCtxCreate a") ||
      !ok(cuCtxCreate(&b, nullptr, 0, d), "cuCtxCreate b"))
    return 1;
  for (int r = 0; r < rounds; ++r) {
    ok(cuCtxSetCurrent(a), "set a");
    driver_round(h, 2 * r);
    ok(cuCtxSetCurrent(b), "set b");
    driver_round(h, 2 * r + 1);
    ok(cuCtxDestroy(a), "cuCtxDestroy a");  // b stays current
    driver_round(h, 2 * r + 1);
    if (!ok(cuCtxCreate(&a, nullptr, 0, d), "cuCtxCreate a again")) return 1;
    report(r);
  }
  ok(cuCtxDestroy(a), "cuCtxDestroy a");
  ok(cuCtxDestroy(b), "cuCtxDestroy b");
  return 0;
}

unsigned long long context_id(CUcontext ctx);

// The driver's reset itself, not cmt's hook: looked up by the C library's own dlsym, found with
// dlvsym (cmt hooks dlsym, which would answer with its hook, and not dlvsym).
using ResetFn = CUresult (*)(CUdevice);
ResetFn unhooked_reset() {
  using DlsymFn = void* (*)(void*, const char*);
  auto libc_dlsym = reinterpret_cast<DlsymFn>(dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34"));
  if (!libc_dlsym)
    libc_dlsym = reinterpret_cast<DlsymFn>(dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5"));
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return libc_dlsym && cuda
             ? reinterpret_cast<ResetFn>(libc_dlsym(cuda, "cuDevicePrimaryCtxReset_v2"))
             : nullptr;
}

// The primary context retained and made current for a round, then reset behind cmt's back; its
// handle comes back for the next round with a new id. Released as often as retained at the end.
int unseen_rounds(int rounds) {
  Host h;
  const CUdevice d = first_device();
  const ResetFn reset = unhooked_reset();
  if (!reset) {
    std::fprintf(stderr, "libc's dlsym found no cuDevicePrimaryCtxReset_v2 in libcuda.so.1\n");
    return 1;
  }
  for (int r = 0; r < rounds; ++r) {
    CUcontext c = nullptr;
    if (!ok(cuDevicePrimaryCtxRetain(&c, d), "cuDevicePrimaryCtxRetain") ||
        !ok(cuCtxSetCurrent(c), "cuCtxSetCurrent"))
      return 1;
    std::printf("round %d: context %p, id %llu\n", r, static_cast<void*>(c), context_id(c));
    driver_round(h, r);
    ok(cuCtxSetCurrent(nullptr), "cuCtxSetCurrent(null)");
    ok(reset(d), "the driver's reset");
    report(r);
  }
  for (int r = 0; r < rounds; ++r) ok(cuDevicePrimaryCtxRelease(d), "cuDevicePrimaryCtxRelease");
  return 0;
}

// What cuCtxGetId costs a call, in ns, over a million calls on the current context: an end cmt
// does not hook could be noticed at a copy by its context's id (never reused, where a handle may
// be), if asking is cheap enough to do at every copy.
double context_id_ns() {
  CUcontext ctx = nullptr;
  unsigned long long id = 0, sum = 0;
  if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return -1;
  constexpr int kCalls = 1000000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) {
    if (cuCtxGetId(ctx, &id) != CUDA_SUCCESS) return -1;
    sum += id;
  }
  const auto t1 = std::chrono::steady_clock::now();
  return sum == 0 ? -1 : std::chrono::duration<double, std::nano>(t1 - t0).count() / kCalls;
}

unsigned long long context_id(CUcontext ctx) {
  unsigned long long id = 0;
  return cuCtxGetId(ctx, &id) == CUDA_SUCCESS ? id : 0;
}

// Facts, not checks: whether a portable registration outlives the context that made it, whether
// a new context's handle repeats the old one's (and its id does not), and cuCtxGetId's cost.
int probe() {
  const CUdevice d = first_device();
  const std::size_t n = 8u << 20;
  void* mem = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  std::memset(mem, 1, n);
  CUcontext a = nullptr, b = nullptr;
  ok(cuCtxCreate(&a, nullptr, 0, d), "cuCtxCreate a");
  const unsigned long long id_a = context_id(a);
  std::printf("probe: cuCtxGetId %.1f ns a call\n", context_id_ns());
  ok(cuMemHostRegister(mem, n, CU_MEMHOSTREGISTER_PORTABLE), "register in a");
  ok(cuCtxDestroy(a), "cuCtxDestroy a");
  ok(cuCtxCreate(&b, nullptr, 0, d), "cuCtxCreate b");
  std::printf("probe: context ids %llu then %llu\n", id_a, context_id(b));
  unsigned flags = 0;
  const CUresult got = cuMemHostGetFlags(&flags, mem);
  const CUresult again = cuMemHostRegister(mem, n, CU_MEMHOSTREGISTER_PORTABLE);
  const char *g = nullptr, *r = nullptr;
  cuGetErrorName(got, &g);
  cuGetErrorName(again, &r);
  std::printf(
      "probe: after its context ended, the portable registration: flags query %s, "
      "register again %s; context handles %p then %p\n",
      g, r, static_cast<void*>(a), static_cast<void*>(b));
  if (again == CUDA_SUCCESS) cuMemHostUnregister(mem);
  ok(cuCtxDestroy(b), "cuCtxDestroy b");
  CUcontext p1 = nullptr, p2 = nullptr;
  ok(cuDevicePrimaryCtxRetain(&p1, d), "retain");
  const unsigned long long id_p1 = context_id(p1);
  ok(cuDevicePrimaryCtxReset(d), "reset");
  ok(cuDevicePrimaryCtxRetain(&p2, d), "retain again");
  std::printf("probe: primary context %p (id %llu), after a reset %p (id %llu)\n",
              static_cast<void*>(p1), id_p1, static_cast<void*>(p2), context_id(p2));
  ok(cuDevicePrimaryCtxRelease(d), "release");
  ok(cuDevicePrimaryCtxRelease(d), "release");
  munmap(mem, n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s reset|contexts|primary|two|unseen|probe [ROUNDS]\n", argv[0]);
    return 2;
  }
  int count = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  const std::string what = argv[1];
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 6;
  int rc = 2;
  if (what == "reset")
    rc = reset_rounds(rounds);
  else if (what == "contexts")
    rc = context_rounds(rounds);
  else if (what == "primary")
    rc = primary_rounds(rounds);
  else if (what == "two")
    rc = two_contexts(rounds);
  else if (what == "unseen")
    rc = unseen_rounds(rounds);
  else if (what == "probe")
    rc = probe();
  else
    std::fprintf(stderr, "unknown scenario '%s'\n", what.c_str());
  std::printf("large copies: %ld\n", g_large_copies);
  if (rc == 0 && g_failures) rc = 1;
  std::printf("%s: %d failures\n", what.c_str(), g_failures);
  return rc;
}
