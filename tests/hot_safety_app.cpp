// Hot buffers' safety suite (issue 33): a randomized program that copies host buffers to a GPU and
// back again and again (so that cmt with register = hot registers them), and between copies
// gives their pages back and takes new ones in every way a program can: free and malloc again
// (often at the same address), realloc, munmap and mmap at the same address, mremap, madvise
// (DONTNEED), malloc_trim, buffers made by another thread (another arena's heap), fork (a child writing its copy of a buffer), and a 40 MiB buffer made,
// copied and freed (glibc unmaps it inside free()). Every copy is checked
// byte for byte against what the program wrote last:
//   host to device: cuMemcpyHtoDAsync from the buffer, the buffer overwritten at once (a pageable
//     copy's caller may), then the stream synchronized and the device's bytes read back through
//     pinned memory: they must be the bytes at the call;
//   device to host: cuMemcpyDtoHAsync into the buffer: every byte must be there when the call
//     returns (a pageable copy is synchronous);
//   and both again through cuMemcpy2DAsync or cuMemcpy3DAsync (rows of the buffer), copies cmt
//     leaves to CUDA.
// After a run of copies of a buffer (which cmt may have registered), CUDA's answers about it
// (cuPointerGetAttribute's memory type, cuPointerGetAttributes' memory type, device ordinal,
// managed flag, context and host pointer) must be those for a pageable page the program never
// copies: a buffer it did not register is not pinned, whatever cmt did.
// Prints "ops N copies C wrong_bytes W copies_2d D queries Q wrong_answers A" and exits 1 if any
// byte or answer was wrong.
//
// usage: hot_safety_app OPS SEED [--self-register]
//   --self-register: the program itself registers each mmap'd buffer with cuMemHostRegister and
//   never unregisters it before munmap: the danger cmt must avoid, so that a run on a GPU shows
//   the check can fail (wrong bytes from stale pages). Not with the fake driver.
#include <cuda.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t kMost = 4u << 20;
// Above glibc's largest mmap threshold (32 MiB): always an mmap'd chunk, which free() unmaps
// inside libc, where no preloaded hook sees it.
constexpr std::size_t kBig = 40u << 20;
constexpr int kSlots = 6;

#define CHECK(call)                                                               \
  do {                                                                            \
    CUresult r_ = (call);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                     \
      std::fprintf(stderr, "%s failed: %d (line %d)\n", #call, int(r_), __LINE__); \
      std::exit(2);                                                               \
    }                                                                             \
  } while (0)

enum class Kind { Malloc, Memalign, Mmap, ThreadMalloc };  // the last: another arena's heap

struct Slot {
  Kind kind = Kind::Malloc;
  unsigned char* p = nullptr;
  std::size_t bytes = 0;
};

std::mt19937_64 rng;
std::uint64_t g_copies = 0, g_wrong = 0, g_ops = 0, g_copies_2d = 0, g_queries = 0,
              g_wrong_answers = 0, g_beside_steps = 0;
alignas(4096) unsigned char g_never_copied[2 * 4096];  // pageable, never registered by anyone
bool g_self_register = false;

std::size_t pick_size() {
  static const std::size_t sizes[] = {64u << 10, (200u << 10) + 24, 1u << 20, (3u << 20) + 4096 + 8,
                                      kMost};
  return sizes[rng() % (sizeof(sizes) / sizeof(sizes[0]))];
}

// A pattern of its own for each seed, eight bytes at a time (buffers are up to 40 MiB).
void fill(unsigned char* p, std::size_t n, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<unsigned char>(x >> (8 * (i % 8)));
}

std::uint64_t count_wrong(const unsigned char* got, const unsigned char* want, std::size_t n) {
  if (std::memcmp(got, want, n) == 0) return 0;
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += got[i] != want[i];
  return wrong;
}

void allocate(Slot& s, void* hint = nullptr) {
  // Registered pages that stay registered (--self-register) are met again at the same size.
  if (!(g_self_register && hint)) s.bytes = pick_size();
  switch (s.kind) {
    case Kind::ThreadMalloc:
      std::thread([&s] { s.p = static_cast<unsigned char*>(std::malloc(s.bytes)); }).join();
      break;
    case Kind::Malloc:
      s.p = static_cast<unsigned char*>(std::malloc(s.bytes));
      break;
    case Kind::Memalign: {
      void* p = nullptr;
      if (posix_memalign(&p, 64, s.bytes) != 0) p = nullptr;
      s.p = static_cast<unsigned char*>(p);
      break;
    }
    case Kind::Mmap: {
      void* p = mmap(hint, s.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      s.p = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
      // At an address whose old pages are still registered this fails, and CUDA keeps reading
      // the old pages: the danger the check must catch.
      if (s.p && g_self_register) (void)cuMemHostRegister(s.p, s.bytes, 0);
      break;
    }
  }
  if (!s.p) {
    std::fprintf(stderr, "out of memory\n");
    std::exit(2);
  }
  std::memset(s.p, 0, s.bytes);
}

// Half the page releases go through libc's syscall(), as code that bypasses the wrappers makes
// them: libcmt-release.so must see those too.
bool raw() { return rng() % 2 == 0; }

void release(Slot& s) {
  if (s.kind == Kind::Mmap)  // with --self-register, deliberately never unregistered
    raw() ? static_cast<void>(syscall(SYS_munmap, s.p, s.bytes))
          : static_cast<void>(munmap(s.p, s.bytes));
  else
    std::free(s.p);
  s.p = nullptr;
}

struct Gpu {
  CUdeviceptr dev = 0;
  unsigned char* pinned = nullptr;  // the device's bytes read back
  std::vector<unsigned char> want;
  CUstream stream = nullptr;
};

// Host to device: the device must get the bytes at the call, though the buffer changes at once.
// `early`: false for a copy the fake driver may make itself (under 64 KiB), whose copies of
// pageable memory do not wait as CUDA's do: then the bytes are only checked after the wait.
void copy_up_at(Gpu& g, unsigned char* p, std::size_t n, bool early = true) {
  fill(p, n, rng());
  std::memcpy(g.want.data(), p, n);
  CHECK(cuMemcpyHtoDAsync(g.dev, p, n, g.stream));
  if (early) std::memset(p, 0xEE, n);  // allowed: a pageable copy's source is consumed at return
  CHECK(cuStreamSynchronize(g.stream));
  CHECK(cuMemcpyDtoH(g.pinned, g.dev, n));
  g_wrong += count_wrong(g.pinned, g.want.data(), n);
  ++g_copies;
}
void copy_up(Gpu& g, Slot& s) { copy_up_at(g, s.p, s.bytes); }

// Device to host: every byte in the buffer when the call returns.
void copy_down_at(Gpu& g, unsigned char* p, std::size_t n, bool early = true) {
  fill(g.pinned, n, rng());
  CHECK(cuMemcpyHtoD(g.dev, g.pinned, n));
  CHECK(cuMemcpyDtoHAsync(p, g.dev, n, g.stream));
  if (early) g_wrong += count_wrong(p, g.pinned, n);
  CHECK(cuStreamSynchronize(g.stream));
  if (!early) g_wrong += count_wrong(p, g.pinned, n);
  ++g_copies;
}
void copy_down(Gpu& g, Slot& s) { copy_down_at(g, s.p, s.bytes); }

// All but the last few bytes of a buffer copied until registered, then those bytes alone, a copy
// too small to be registered that shares a page with the registration (a layer norm's weight
// after a matrix in the heap), then the rest again: each copy's bytes checked.
void copy_beside(Gpu& g, Slot& s) {
  const std::size_t tail = 1 + rng() % ((64u << 10) - 1);  // under register_from
  if (s.bytes < tail + (64u << 10)) return;
  unsigned char* end = s.p + s.bytes - tail;
  for (int i = 0; i < 3; ++i) (rng() % 2 ? copy_up_at : copy_down_at)(g, s.p, s.bytes - tail, true);
  for (int i = 0; i < 2; ++i) (rng() % 2 ? copy_up_at : copy_down_at)(g, end, tail, false);
  (rng() % 2 ? copy_up_at : copy_down_at)(g, s.p, s.bytes - tail, true);
  ++g_beside_steps;
}

// The same two checks through a 2D copy, which cmt leaves to CUDA: rows of `width` bytes
// `pitch` apart in the buffer, packed on the device. A registration of cmt's on the buffer would
// make CUDA take it as pinned memory and return before the rows had moved; cmt drops it first.
struct Rows {
  std::size_t count, pitch, width;
};
Rows pick_rows(const Slot& s) {
  Rows r;
  r.count = 2 + rng() % 7;
  r.pitch = s.bytes / r.count;
  r.width = r.pitch - rng() % std::min<std::size_t>(r.pitch, 4096);
  return r;
}
CUDA_MEMCPY2D rows_copy(const Rows& r) {
  CUDA_MEMCPY2D c{};
  c.WidthInBytes = r.width;
  c.Height = r.count;
  return c;
}

// A failed copy's rows, to find which of their bytes CUDA refused; the result, unchanged.
CUresult said_of(CUresult r, const char* kind, const CUDA_MEMCPY2D& c) {
  if (r != CUDA_SUCCESS) {
    const bool up = c.srcMemoryType == CU_MEMORYTYPE_HOST;
    std::fprintf(stderr, "%s copy of %zu rows of %zu bytes, pitch %zu, host %p (%s)\n", kind,
                 c.Height, c.WidthInBytes, up ? c.srcPitch : c.dstPitch,
                 up ? c.srcHost : c.dstHost, up ? "source" : "destination");
  }
  return r;
}

// The rows as cuMemcpy2DAsync copies them, or, one time in two, as a one-slice cuMemcpy3DAsync.
void copy_rows_async(const CUDA_MEMCPY2D& c, CUstream stream) {
  if (rng() % 2) {
    CHECK(said_of(cuMemcpy2DAsync(&c, stream), "2D", c));
    return;
  }
  CUDA_MEMCPY3D d{};
  d.srcMemoryType = c.srcMemoryType;
  d.srcHost = c.srcHost;
  d.srcDevice = c.srcDevice;
  d.srcPitch = c.srcPitch;
  d.srcHeight = c.Height;
  d.dstMemoryType = c.dstMemoryType;
  d.dstHost = c.dstHost;
  d.dstDevice = c.dstDevice;
  d.dstPitch = c.dstPitch;
  d.dstHeight = c.Height;
  d.WidthInBytes = c.WidthInBytes;
  d.Height = c.Height;
  d.Depth = 1;
  CHECK(said_of(cuMemcpy3DAsync(&d, stream), "3D", c));
}

void copy_up_2d(Gpu& g, Slot& s) {
  const Rows r = pick_rows(s);
  fill(s.p, s.bytes, rng());
  for (std::size_t i = 0; i < r.count; ++i)
    std::memcpy(g.want.data() + i * r.width, s.p + i * r.pitch, r.width);
  CUDA_MEMCPY2D c = rows_copy(r);
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = s.p;
  c.srcPitch = r.pitch;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = g.dev;
  c.dstPitch = r.width;
  copy_rows_async(c, g.stream);
  std::memset(s.p, 0xEE, s.bytes);
  CHECK(cuStreamSynchronize(g.stream));
  CHECK(cuMemcpyDtoH(g.pinned, g.dev, r.count * r.width));
  g_wrong += count_wrong(g.pinned, g.want.data(), r.count * r.width);
  ++g_copies, ++g_copies_2d;
}

void copy_down_2d(Gpu& g, Slot& s) {
  const Rows r = pick_rows(s);
  fill(g.pinned, r.count * r.width, rng());
  CHECK(cuMemcpyHtoD(g.dev, g.pinned, r.count * r.width));
  CUDA_MEMCPY2D c = rows_copy(r);
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = g.dev;
  c.srcPitch = r.width;
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = s.p;
  c.dstPitch = r.pitch;
  copy_rows_async(c, g.stream);
  for (std::size_t i = 0; i < r.count; ++i)
    g_wrong += count_wrong(s.p + i * r.pitch, g.pinned + i * r.width, r.width);
  CHECK(cuStreamSynchronize(g.stream));
  ++g_copies, ++g_copies_2d;
}

// CUDA's answers about the address `p`, with a host pointer given relative to `p`.
struct Answers {
  CUresult one = CUDA_SUCCESS, all = CUDA_SUCCESS;
  unsigned type_one = 0, type = 0, managed = 0;
  int ordinal = 0;
  CUcontext context = nullptr;
  std::intptr_t host_offset = 0;
  bool operator==(const Answers& o) const {
    return one == o.one && all == o.all && type_one == o.type_one && type == o.type &&
           managed == o.managed && ordinal == o.ordinal && context == o.context &&
           host_offset == o.host_offset;
  }
};
Answers answers_about(const void* p) {
  Answers a;
  const auto dp = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
  a.one = cuPointerGetAttribute(&a.type_one, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp);
  CUdeviceptr host = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_CONTEXT,
                                 CU_POINTER_ATTRIBUTE_HOST_POINTER};
  void* data[] = {&a.type, &a.ordinal, &a.managed, &a.context, &host};
  a.all = cuPointerGetAttributes(5, attrs, data, dp);
  a.host_offset = static_cast<std::intptr_t>(host - dp);
  return a;
}
void check_answers(const Slot& s) {
  const std::size_t at = (s.bytes / 2) & ~std::size_t{4095};
  const Answers want = answers_about(g_never_copied + 4096 + 16);
  ++g_queries;
  if (!(answers_about(s.p + at + 16) == want)) ++g_wrong_answers;
}

// One random step on one slot.
void step(Gpu& g, Slot& s) {
  const unsigned op = rng() % 100;
  if (op < 41) {  // the same buffer copied several times in a row: hot
    for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n; ++i)
      (rng() % 2 ? copy_up : copy_down)(g, s);
    if (!g_self_register) check_answers(s);
  } else if (op < 45 && !g_self_register) {
    copy_beside(g, s);
  } else if (op < 60) {  // given back and taken again, often at the same address
    void* old = s.p;
    release(s);
    s.kind = g_self_register ? Kind::Mmap : static_cast<Kind>(rng() % 4);
    allocate(s, s.kind == Kind::Mmap ? old : nullptr);
  } else if (op < 68 && s.kind != Kind::Mmap) {
    const std::size_t bytes = pick_size();
    void* p = std::realloc(s.p, bytes);
    if (!p) std::exit(2);
    s.p = static_cast<unsigned char*>(p);
    s.bytes = bytes;
  } else if (op < 76) {  // the pages dropped: zeros on the next touch
    const long page = sysconf(_SC_PAGESIZE);
    auto lo = (reinterpret_cast<std::uintptr_t>(s.p) + page - 1) / page * page;
    auto hi = (reinterpret_cast<std::uintptr_t>(s.p) + s.bytes) / page * page;
    void* at = reinterpret_cast<void*>(lo);
    if (hi > lo)
      raw() ? static_cast<void>(syscall(SYS_madvise, at, hi - lo, MADV_DONTNEED))
            : static_cast<void>(madvise(at, hi - lo, MADV_DONTNEED));
  } else if (op < 82 && s.kind == Kind::Mmap && !g_self_register) {  // moved to new pages
    const std::size_t bytes = pick_size();
    void* p = raw() ? reinterpret_cast<void*>(syscall(SYS_mremap, s.p, s.bytes, bytes,
                                                      MREMAP_MAYMOVE, nullptr))
                    : mremap(s.p, s.bytes, bytes, MREMAP_MAYMOVE);
    if (p != MAP_FAILED) s.p = static_cast<unsigned char*>(p), s.bytes = bytes;
  } else if (op < 86) {
    malloc_trim(0);
  } else if (op < 88) {  // a large buffer made, copied until registered, freed
    Slot big;
    big.p = static_cast<unsigned char*>(std::malloc(kBig));
    big.bytes = kBig;
    if (!big.p) std::exit(2);
    for (int i = 0; i < 3; ++i) copy_up(g, big);
    std::free(big.p);
  } else if (op < 91) {  // a child writes its own copy of the buffer, then the parent copies
    const pid_t child = fork();
    if (child == 0) {
      std::memset(s.p, 0x55, s.bytes);
      _exit(s.p[s.bytes - 1] == 0x55 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++g_wrong;
  } else if (op < 95 || g_self_register) {  // (the program's own registrations are pinned)
    copy_up(g, s);
  } else {  // a copy cmt leaves to CUDA, on a buffer it may have registered
    (rng() % 2 ? copy_up_2d : copy_down_2d)(g, s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OPS SEED [--self-register]\n", argv[0]);
    return 2;
  }
  const long ops = std::atol(argv[1]);
  rng.seed(std::strtoull(argv[2], nullptr, 10));
  g_self_register = argc > 3 && std::string(argv[3]) == "--self-register";
  int count = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    std::printf("no CUDA GPU\n");
    return 77;
  }
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CHECK(cuDeviceGet(&device, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, device));
  CHECK(cuCtxSetCurrent(ctx));
  Gpu g;
  CHECK(cuMemAlloc(&g.dev, kBig));
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&g.pinned), kBig));
  CHECK(cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING));
  g.want.resize(kBig);
  Slot slots[kSlots];
  for (int i = 0; i < kSlots; ++i) {
    slots[i].kind = g_self_register ? Kind::Mmap : static_cast<Kind>(i % 4);
    allocate(slots[i]);
  }
  for (long i = 0; i < ops; ++i, ++g_ops) step(g, slots[rng() % kSlots]);
  std::printf("ops %llu copies %llu wrong_bytes %llu copies_2d %llu queries %llu wrong_answers %llu "
              "beside_steps %llu\n",
              static_cast<unsigned long long>(g_ops), static_cast<unsigned long long>(g_copies),
              static_cast<unsigned long long>(g_wrong),
              static_cast<unsigned long long>(g_copies_2d),
              static_cast<unsigned long long>(g_queries),
              static_cast<unsigned long long>(g_wrong_answers),
              static_cast<unsigned long long>(g_beside_steps));
  return g_wrong || g_wrong_answers ? 1 : 0;
}
