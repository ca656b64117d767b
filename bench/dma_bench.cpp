// cmt-bench-dma: what the GPU's copy engine gives cmt's pipeline, with the CPU side taken away
// or put back one part at a time, without libcmt.so. Through cmt, a 16 MiB host-to-device copy
// is fully staged after ~230 us but completes after ~460 us, where one pinned copy takes 320 us:
// the DMAs out of the ring slow down while CPU threads stage (bench/NOTES.md 15-18). Modes:
//   one     one cudaMemcpyAsync of the whole size from (to) a cudaMallocHost buffer: the ceiling
//   chain   the same bytes as back-to-back chunk-sized DMAs from the same pinned buffer, no events
//           and no waiting: the cost of splitting alone
//   pieces  the same bytes as a chain of chunk-sized DMAs through a ring of registered pages
//           (mmap + cudaHostRegister, as libcmt.so's ring), an event recorded after each, a slot
//           reused once its event has completed: the engine's DMA side alone
//   alloc   pieces, with the ring from cudaMallocHost instead of registered pages
//   wc      pieces, with the ring write-combined (cudaHostAllocWriteCombined), host to device only
//   busy    pieces, while --cpu-threads threads memcpy between pageable buffers, loading memory
//   busynt  pieces, while the threads copy with non-temporal stores, as the staging workers do
//   two     pieces, alternating between two streams (two copy engines), each piece still ordered
//           after the caller's earlier work by an event
//   twont   two, under the non-temporal load of busynt
//   busyreg busynt, with each thread's destination registered with CUDA (as the ring is)
//   staged  the engine's pipeline without the engine: --cpu-threads threads copy between a
//           pageable buffer and the ring's slots with non-temporal stores (--staging memcpy:
//           memcpy), each piece split across them (--units N: in N units, 1 = whole pieces;
//           --flush-ring: each unit's ring lines flushed from the CPU's caches once copied;
//           --ring wc: through the write-combined ring, drained with streaming loads);
//           H2D enqueues each piece's DMA as soon as it is staged, D2H hands each piece to the
//           threads as soon as its DMA has landed
//   staged2 staged, the DMAs alternating between two streams
//   pull    pieces host to device, each moved by a kernel that reads the slot through its device
//           mapping (the GPU's SMs pulling, many reads in flight) instead of by the copy engine
//   pullnt  pull, under the non-temporal load of busynt
//   pullstaged  staged host to device, each piece moved by the kernel
//   pageable  one cudaMemcpyAsync straight from (into) the pageable buffer: CUDA's own path
//   reg     no staging at all: the user's pageable buffer page-locked for the one copy
//           (cudaHostRegister of its whole pages), one DMA straight from (into) it, then
//           cudaHostUnregister; timed from the register to the unregister's return
//   regonly reg without the DMA: what page-locking and releasing the buffer costs alone
//   regpieces  reg in chunk-sized pieces: --cpu-threads threads register pieces in parallel,
//           each piece's DMA enqueued as soon as it is registered, then the threads release them
//   regfresh  regpieces device to host into freshly mapped memory (pinning faults its pages in)
//   regbusy reg while a kernel spins for 20 ms on another stream: if the time includes the
//           kernel's, registering or releasing waits for the whole device
// Each rep is timed from the first enqueue to the stream's completion; median [min-max] GB/s.
//
// usage: cmt-bench-dma [--sizes 16M,64M,1G] [--chunk 2M] [--slots 12] [--reps 7]
//                      [--cpu-threads 8] [--modes one,chain,...] [--staging nt|memcpy]
//                      [--units N] [--flush-ring] [--ring wb|wc] [--json FILE]
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/host_copy.h"  // copy_streaming
#include "config/options.h"    // parse_byte_size

namespace {

#define CU_CHECK(x)                                                                   \
  do {                                                                                \
    CUresult e_ = (x);                                                                \
    if (e_ != CUDA_SUCCESS) {                                                         \
      std::fprintf(stderr, "cmt-bench-dma: %s failed: CUDA error %d\n", #x, (int)e_); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "cmt-bench-dma: %s failed: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(
      stderr,
      "cmt-bench-dma: %s\nusage: cmt-bench-dma [--sizes 16M,64M,1G] [--chunk 2M] "
      "[--slots 12] [--reps 7] [--cpu-threads 8] [--modes one,chain,...] [--staging nt|memcpy] "
      "[--units N] [--flush-ring] [--ring wb|wc] [--json FILE]\n",
      why.c_str());
  std::exit(2);
}

std::size_t size_arg(const std::string& text, const char* what) {
  std::size_t v = 0;
  if (!cmt::parse_byte_size(text, &v) || v == 0)
    usage(std::string("bad ") + what + " '" + text + "' (expected a size such as 2M)");
  return v;
}

int count_arg(const std::string& text, const char* what, int min) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end || v < min || v > 4096)
    usage(std::string("bad ") + what + " '" + text + "' (expected an integer from " +
          std::to_string(min) + ")");
  return static_cast<int>(v);
}

struct Options {
  std::vector<std::size_t> sizes = {16u << 20, 64u << 20, 1u << 30};
  std::size_t chunk = 2u << 20;
  int slots = 12, reps = 7, cpu_threads = 8;
  // How the staged modes' threads copy: non-temporal stores or memcpy, and in how many units each
  // piece is split (0: one per thread; 1: each piece copied whole by one thread).
  bool staging_nt = true;
  int units = 0;
  bool flush_ring = false;
  bool ring_wc = false;  // staged modes through the write-combined ring (--ring wc)
  std::vector<std::string> modes = {
      "one",        "chain", "pieces",  "alloc",     "wc",      "busy",     "busynt",
      "two",        "twont", "busyreg", "staged",    "staged2", "pull",     "pullnt",
      "pullstaged", "reg",   "regonly", "regpieces", "regbusy", "regfresh", "pageable"};
  std::string json;
};

// "a,b,,c" -> {"a", "b", "c"}
std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  for (char c : text + ",") {
    if (c != ',') {
      item += c;
    } else if (!item.empty()) {
      items.push_back(item);
      item.clear();
    }
  }
  return items;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--sizes") {
      o.sizes.clear();
      for (const std::string& item : split_commas(value()))
        o.sizes.push_back(size_arg(item, "size"));
      if (o.sizes.empty()) usage("--sizes is empty");
    } else if (a == "--chunk") {
      o.chunk = size_arg(value(), "chunk");
    } else if (a == "--slots") {
      o.slots = count_arg(value(), "--slots", 2);
    } else if (a == "--reps") {
      o.reps = count_arg(value(), "--reps", 1);
    } else if (a == "--cpu-threads") {
      o.cpu_threads = count_arg(value(), "--cpu-threads", 0);
    } else if (a == "--staging") {
      const std::string v = value();
      if (v != "nt" && v != "memcpy") usage("bad --staging '" + v + "' (expected nt or memcpy)");
      o.staging_nt = v == "nt";
    } else if (a == "--flush-ring") {
#if defined(__x86_64__)
      o.flush_ring = true;
#else
      usage("--flush-ring needs an x86-64 CPU (CLFLUSHOPT)");
#endif
    } else if (a == "--ring") {
      const std::string v = value();
      if (v != "wb" && v != "wc") usage("bad --ring '" + v + "' (expected wb or wc)");
      o.ring_wc = v == "wc";
    } else if (a == "--units") {
      o.units = count_arg(value(), "--units", 0);
    } else if (a == "--modes") {
      const std::vector<std::string> known = Options().modes;  // every mode there is
      o.modes = split_commas(value());
      for (const std::string& m : o.modes)
        if (std::find(known.begin(), known.end(), m) == known.end())
          usage("unknown mode '" + m + "'");
      if (o.modes.empty()) usage("--modes is empty");
    } else if (a == "--json") {
      o.json = value();
    } else {
      usage("unknown argument '" + a + "'");
    }
  }
  return o;
}

// A staging ring: `slots` x `chunk` bytes of page-locked memory, allocated one of three ways.
enum class RingKind { Registered, Allocated, WriteCombined };

struct Ring {
  char* data = nullptr;
  char* device_view = nullptr;  // the ring as kernels address it
  std::size_t bytes = 0;
  RingKind kind;
  Ring(RingKind k, std::size_t n) : bytes(n), kind(k) {
    if (kind == RingKind::Registered) {
      void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) usage("cannot map the ring");
      std::memset(m, 1, n);
      CHECK(cudaHostRegister(m, n, cudaHostRegisterPortable | cudaHostRegisterMapped));
      data = static_cast<char*>(m);
      CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_view), data, 0));
    } else {
      unsigned flags = kind == RingKind::WriteCombined ? cudaHostAllocWriteCombined : 0;
      CHECK(cudaHostAlloc(reinterpret_cast<void**>(&data), n, flags));
      std::memset(data, 1, n);
    }
  }
  ~Ring() {
    if (kind == RingKind::Registered) {
      cudaHostUnregister(data);
      munmap(data, bytes);
    } else {
      cudaFreeHost(data);
    }
  }
};

// Memory traffic like the staging workers': each thread copies between two pageable buffers of
// its own until stopped, with memcpy or with non-temporal stores.
class BusyCpus {
 public:
  BusyCpus(int threads, std::size_t bytes, bool streaming, bool registered = false) {
    for (int t = 0; t < threads; ++t)
      threads_.emplace_back([this, bytes, streaming, registered] {
        std::vector<char> a(bytes, 1), b(bytes, 2);
        if (registered) CHECK(cudaHostRegister(b.data(), bytes, cudaHostRegisterPortable));
        ready_.fetch_add(1);
        while (!stop_.load(std::memory_order_relaxed)) {
          if (streaming)
            cmt::copy_streaming(b.data(), a.data(), bytes);
          else
            std::memcpy(b.data(), a.data(), bytes);
        }
        if (registered) cudaHostUnregister(b.data());
      });
    while (ready_.load() < threads) std::this_thread::yield();
  }
  ~BusyCpus() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> ready_{0};
  std::vector<std::thread> threads_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One whole-size DMA between the device buffer and `host`.
double time_one(bool h2d, char* dev, char* host, std::size_t bytes, cudaStream_t s) {
  auto t0 = std::chrono::steady_clock::now();
  CHECK(h2d ? cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s)
            : cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  return seconds_since(t0);
}

// Chunk-sized DMAs enqueued back to back from one pinned buffer, nothing between them.
double time_chain(bool h2d, char* dev, char* host, std::size_t chunk, std::size_t bytes,
                  cudaStream_t s) {
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t off = 0; off < bytes; off += chunk) {
    const std::size_t n = std::min(chunk, bytes - off);
    CHECK(h2d ? cudaMemcpyAsync(dev + off, host + off, n, cudaMemcpyHostToDevice, s)
              : cudaMemcpyAsync(host + off, dev + off, n, cudaMemcpyDeviceToHost, s));
  }
  CHECK(cudaStreamSynchronize(s));
  return seconds_since(t0);
}

// dst[i] = src[i] for i < n16, 16 bytes per thread and step, grid-stride: the GPU reads host
// memory with its SMs, which keep far more reads in flight than a copy engine. PTX, compiled by
// the driver at start-up.
const char kPullPtx[] = R"(
.version 7.0
.target sm_75
.address_size 64
.visible .entry cmt_pull(.param .u64 dst, .param .u64 src, .param .u64 n16)
{
  .reg .pred p;
  .reg .b32 r<6>;
  .reg .b32 x<4>;
  .reg .b64 rd<9>;
  ld.param.u64 rd1, [dst];
  ld.param.u64 rd2, [src];
  ld.param.u64 rd3, [n16];
  cvta.to.global.u64 rd1, rd1;
  cvta.to.global.u64 rd2, rd2;
  mov.u32 r1, %ctaid.x;
  mov.u32 r2, %ntid.x;
  mov.u32 r3, %tid.x;
  mad.lo.u32 r4, r1, r2, r3;
  cvt.u64.u32 rd4, r4;
  mov.u32 r5, %nctaid.x;
  mul.lo.u32 r5, r5, r2;
  cvt.u64.u32 rd5, r5;
LOOP:
  setp.ge.u64 p, rd4, rd3;
  @p bra DONE;
  shl.b64 rd6, rd4, 4;
  add.s64 rd7, rd2, rd6;
  ld.global.v4.u32 {x0, x1, x2, x3}, [rd7];
  add.s64 rd8, rd1, rd6;
  st.global.v4.u32 [rd8], {x0, x1, x2, x3};
  add.s64 rd4, rd4, rd5;
  bra LOOP;
DONE:
  ret;
}
)";

// Spins until %globaltimer has advanced by `ns`: keeps a stream busy for a known time.
const char kSpinPtx[] = R"(
.version 7.0
.target sm_75
.address_size 64
.visible .entry cmt_spin(.param .u64 ns)
{
  .reg .pred p;
  .reg .b64 rd<5>;
  ld.param.u64 rd1, [ns];
  mov.u64 rd2, %globaltimer;
  add.s64 rd3, rd2, rd1;
WAIT:
  mov.u64 rd4, %globaltimer;
  setp.lt.u64 p, rd4, rd3;
  @p bra WAIT;
  ret;
}
)";

// The driver functions the kernel needs, found through the runtime so that this program does
// not link libcuda itself; set in main.
CUfunction g_pull = nullptr, g_spin = nullptr;
decltype(&cuLaunchKernel) g_launch = nullptr;

template <typename Fn>
Fn driver_entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found));
  if (!fn || found != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "cmt-bench-dma: the driver has no %s\n", name);
    std::exit(1);
  }
  return reinterpret_cast<Fn>(fn);
}

// One piece between the device and a ring slot: a DMA, or for `pull` (host to device only) the
// kernel above reading the slot through its device mapping, on the same stream.
void move_piece(bool h2d, bool pull, char* dev, Ring& ring, char* slot, std::size_t n,
                cudaStream_t s) {
  if (pull && h2d) {
    std::size_t n16 = n / 16;
    if (n16) {
      CUdeviceptr dst = reinterpret_cast<CUdeviceptr>(dev);
      CUdeviceptr src = reinterpret_cast<CUdeviceptr>(ring.device_view + (slot - ring.data));
      void* args[] = {&dst, &src, &n16};
      const unsigned blocks = static_cast<unsigned>(std::clamp<std::size_t>(n16 / 256, 1, 1024));
      CU_CHECK(g_launch(g_pull, blocks, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    }
    if (n % 16)
      CHECK(cudaMemcpyAsync(dev + n16 * 16, slot + n16 * 16, n % 16, cudaMemcpyHostToDevice, s));
    return;
  }
  CHECK(h2d ? cudaMemcpyAsync(dev, slot, n, cudaMemcpyHostToDevice, s)
            : cudaMemcpyAsync(slot, dev, n, cudaMemcpyDeviceToHost, s));
}

// The engine's DMA pattern: chunk-sized DMAs through the ring's slots, an event after each, a
// slot reused only once its previous DMA has completed (polled, as the engine polls). With a
// second stream, pieces alternate between the two; both wait for the caller's stream first, and
// the caller's stream waits for both at the end, so ordering is as with one.
double time_pieces(bool h2d, char* dev, Ring& ring, std::size_t chunk, int slots,
                   std::vector<cudaEvent_t>& events, std::size_t bytes, cudaStream_t caller,
                   cudaStream_t second, cudaEvent_t fork, cudaEvent_t join, bool pull) {
  std::vector<bool> pending(static_cast<std::size_t>(slots), false);
  auto t0 = std::chrono::steady_clock::now();
  if (second) {
    CHECK(cudaEventRecord(fork, caller));
    CHECK(cudaStreamWaitEvent(second, fork, 0));
  }
  std::size_t i = 0;
  for (std::size_t off = 0; off < bytes; off += chunk, ++i) {
    const std::size_t slot = i % static_cast<std::size_t>(slots);
    if (pending[slot]) {
      cudaError_t e;
      while ((e = cudaEventQuery(events[slot])) == cudaErrorNotReady) {
      }
      CHECK(e);
    }
    const std::size_t n = std::min(chunk, bytes - off);
    char* staging = ring.data + slot * chunk;
    cudaStream_t s = second && i % 2 ? second : caller;
    move_piece(h2d, pull, dev + off, ring, staging, n, s);
    CHECK(cudaEventRecord(events[slot], s));
    pending[slot] = true;
  }
  if (second) {
    CHECK(cudaEventRecord(join, second));
    CHECK(cudaStreamWaitEvent(caller, join, 0));
  }
  CHECK(cudaStreamSynchronize(caller));
  return seconds_since(t0);
}

// Writes back and drops [p, p + n) from every CPU cache, so the next DMA touching those lines
// needs no snoop of a core's cache (--flush-ring).
#if defined(__x86_64__)
__attribute__((target("clflushopt"))) void flush_lines(const char* p, std::size_t n) {
  const auto end = reinterpret_cast<std::uintptr_t>(p) + n;
  for (auto line = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63}; line < end;
       line += 64)
    _mm_clflushopt(reinterpret_cast<void*>(line));
  _mm_sfence();
}
#else
void flush_lines(const char*, std::size_t) {}
#endif

// Drains write-combined (uncached) memory: streaming loads of 4 KiB at a time into a buffer that
// stays in L1, then non-temporal stores on to `dst`. Plain loads from such memory are uncached
// and slow; streaming loads fill whole lines at a time. `src` must be 32-byte aligned.
#if defined(__x86_64__)
__attribute__((target("avx2"))) void copy_from_write_combined(void* dst, const void* src,
                                                              std::size_t n) {
  alignas(64) static thread_local char bounce[4096];
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  while (n > 0) {
    const std::size_t m = std::min(n, sizeof(bounce));
    std::size_t i = 0;
    for (; i + 32 <= m; i += 32)
      _mm256_store_si256(reinterpret_cast<__m256i*>(bounce + i),
                         _mm256_stream_load_si256(reinterpret_cast<const __m256i*>(s + i)));
    std::memcpy(bounce + i, s + i, m - i);
    cmt::copy_streaming(d, bounce, m);
    d += m;
    s += m;
    n -= m;
  }
}
#else
void copy_from_write_combined(void* dst, const void* src, std::size_t n) {
  std::memcpy(dst, src, n);
}
#endif

// The engine's pipeline without the engine. Host to device: `threads` threads stage `host` into
// the ring's slots with non-temporal stores or memcpy (each piece split in `units` units, taken
// in order), a slot handed out only once its previous DMA is done, and each piece's DMA enqueued
// (on `caller`, or alternately on `second`) as soon as all of its units are staged. Device to host:
// DMAs into every slot whose previous piece is drained, and each piece handed to the threads,
// which drain it into `host` the same way, as soon as its DMA has landed.
double time_staged(bool h2d, char* dev, char* host, Ring& ring, std::size_t chunk, int slots,
                   std::vector<cudaEvent_t>& events, std::size_t bytes, cudaStream_t caller,
                   cudaStream_t second, cudaEvent_t fork, cudaEvent_t join, int threads,
                   int units_per_piece, bool nt, bool pull, bool flush_ring) {
  const std::size_t pieces = (bytes + chunk - 1) / chunk;
  const std::size_t nslots = static_cast<std::size_t>(slots);
  const std::size_t units =
      static_cast<std::size_t>(units_per_piece > 0 ? units_per_piece : std::max(threads, 1));
  auto length = [&](std::size_t p) { return std::min(chunk, bytes - p * chunk); };
  auto slot_of = [&](std::size_t p) { return ring.data + (p % nslots) * chunk; };
  std::unique_ptr<std::atomic<std::size_t>[]> done(new std::atomic<std::size_t>[pieces]());
  // H2D: pieces whose slots the threads may fill; D2H: pieces landed, for the threads to drain.
  std::atomic<std::size_t> next_unit{0}, published{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < std::max(threads, 1); ++t)
    workers.emplace_back([&] {
      for (;;) {
        const std::size_t u = next_unit.fetch_add(1);
        if (u >= pieces * units) return;
        const std::size_t p = u / units, k = u % units;
        while (published.load(std::memory_order_acquire) <= p) {
        }
        const std::size_t n = length(p);
        // Units start on 64-byte lines (the streaming loads from a write-combined ring need it).
        const std::size_t share = ((n + units - 1) / units + 63) & ~std::size_t{63};
        const std::size_t begin = k * share;
        if (begin < n) {
          char* in_ring = slot_of(p) + begin;
          char* user = host + p * chunk + begin;
          const std::size_t m = std::min(share, n - begin);
          auto copy = nt ? cmt::copy_streaming : cmt::copy_memcpy;
          if (h2d)
            copy(in_ring, user, m);
          else if (ring.kind == RingKind::WriteCombined)
            copy_from_write_combined(user, in_ring, m);
          else
            copy(user, in_ring, m);
          if (flush_ring) flush_lines(in_ring, m);
        }
        done[p].fetch_add(1, std::memory_order_release);
      }
    });
  auto staged = [&](std::size_t p) { return done[p].load(std::memory_order_acquire) == units; };
  std::vector<bool> pending(nslots, false);
  auto t0 = std::chrono::steady_clock::now();
  if (second) {
    CHECK(cudaEventRecord(fork, caller));
    CHECK(cudaStreamWaitEvent(second, fork, 0));
  }
  std::size_t issued = 0, pub = 0;
  auto enqueue = [&](std::size_t p) {
    cudaStream_t s = second && p % 2 ? second : caller;
    move_piece(h2d, pull, dev + p * chunk, ring, slot_of(p), length(p), s);
    CHECK(cudaEventRecord(events[p % nslots], s));
    pending[p % nslots] = true;
  };
  auto landed = [&](std::size_t p) {  // p's DMA (the last one in its slot) has completed
    if (!pending[p % nslots]) return true;
    cudaError_t e = cudaEventQuery(events[p % nslots]);
    if (e == cudaErrorNotReady) return false;
    CHECK(e);
    pending[p % nslots] = false;
    return true;
  };
  if (h2d) {
    while (issued < pieces) {
      while (pub < pieces && pub < issued + nslots && (pub < nslots || landed(pub - nslots)))
        published.store(++pub, std::memory_order_release);
      if (issued < pub && staged(issued)) enqueue(issued++);
    }
  } else {
    while (pub < pieces) {
      while (issued < pieces && (issued < nslots || staged(issued - nslots))) enqueue(issued++);
      if (pub < issued && landed(pub)) published.store(++pub, std::memory_order_release);
    }
    for (std::size_t p = 0; p < pieces; ++p)
      while (!staged(p)) {
      }
  }
  if (second) {
    CHECK(cudaEventRecord(join, second));
    CHECK(cudaStreamWaitEvent(caller, join, 0));
  }
  CHECK(cudaStreamSynchronize(caller));
  const double s = seconds_since(t0);
  for (auto& w : workers) w.join();
  return s;
}

// [buf, buf + bytes) rounded inward to whole pages: what can be page-locked without touching
// the neighbours' pages (the few bytes outside would go through the ring).
std::pair<char*, std::size_t> whole_pages(char* buf, std::size_t bytes) {
  const std::uintptr_t page = 4096, b = reinterpret_cast<std::uintptr_t>(buf);
  const std::uintptr_t first = (b + page - 1) & ~(page - 1), last = (b + bytes) & ~(page - 1);
  return {reinterpret_cast<char*>(first), last > first ? last - first : 0};
}

// reg / regonly / regbusy: the user's buffer page-locked for one copy, one DMA straight from
// (into) it, released once the stream has finished with it.
double time_register(bool h2d, char* dev, char* host, std::size_t bytes, cudaStream_t s, bool dma) {
  auto [p, n] = whole_pages(host, bytes);
  const std::size_t lead = static_cast<std::size_t>(p - host);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(cudaHostRegister(p, n, cudaHostRegisterDefault));
  if (dma) {
    CHECK(h2d ? cudaMemcpyAsync(dev + lead, p, n, cudaMemcpyHostToDevice, s)
              : cudaMemcpyAsync(p, dev + lead, n, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
  }
  CHECK(cudaHostUnregister(p));
  return seconds_since(t0);
}

// regpieces: `threads` threads page-lock chunk-sized pieces of the buffer in parallel, the
// caller enqueues each piece's DMA in order as soon as it is locked, then the threads release
// every piece once the stream is done.
double time_register_pieces(bool h2d, char* dev, char* host, std::size_t bytes, std::size_t chunk,
                            int threads, cudaStream_t s) {
  auto [p, n] = whole_pages(host, bytes);
  const std::size_t lead = static_cast<std::size_t>(p - host);
  const std::size_t pieces = (n + chunk - 1) / chunk;
  auto length = [&](std::size_t k) { return std::min(chunk, n - k * chunk); };
  std::unique_ptr<std::atomic<bool>[]> locked(new std::atomic<bool>[pieces]());
  std::atomic<std::size_t> next{0}, next_release{0};
  std::atomic<bool> release{false};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < std::max(threads, 1); ++t)
    workers.emplace_back([&] {
      for (std::size_t k; (k = next.fetch_add(1)) < pieces;) {
        CHECK(cudaHostRegister(p + k * chunk, length(k), cudaHostRegisterDefault));
        locked[k].store(true, std::memory_order_release);
      }
      while (!release.load(std::memory_order_acquire)) {
      }
      for (std::size_t k; (k = next_release.fetch_add(1)) < pieces;)
        CHECK(cudaHostUnregister(p + k * chunk));
    });
  for (std::size_t k = 0; k < pieces; ++k) {
    while (!locked[k].load(std::memory_order_acquire)) {
    }
    char* h = p + k * chunk;
    char* d = dev + lead + k * chunk;
    CHECK(h2d ? cudaMemcpyAsync(d, h, length(k), cudaMemcpyHostToDevice, s)
              : cudaMemcpyAsync(h, d, length(k), cudaMemcpyDeviceToHost, s));
  }
  CHECK(cudaStreamSynchronize(s));
  release.store(true, std::memory_order_release);
  for (auto& w : workers) w.join();
  return seconds_since(t0);
}

// Exits unless dev[0, bytes) is all `expect`.
void check_device(const char* dev, std::size_t bytes, char expect, const std::string& mode) {
  std::vector<char> back(bytes);
  CHECK(cudaMemcpy(back.data(), dev, bytes, cudaMemcpyDeviceToHost));
  const auto wrong = std::find_if(back.begin(), back.end(), [&](char c) { return c != expect; });
  if (wrong != back.end()) {
    std::fprintf(stderr, "cmt-bench-dma: %s left wrong bytes on the device, the first at %zu\n",
                 mode.c_str(), static_cast<std::size_t>(wrong - back.begin()));
    std::exit(1);
  }
}

struct Result {
  std::size_t bytes;
  const char* dir;
  const char* mode;
  std::vector<double> gbps;
  double median() const {
    std::vector<double> v = gbps;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  }
};

std::string size_text(std::size_t b) {
  if (b >= (1u << 30) && b % (1u << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + "M";
  return std::to_string(b >> 10) + "K";
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cmt-bench-dma: no CUDA GPU found\n");
    return 1;
  }
  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  CHECK(cudaFree(nullptr));  // makes the device's primary context current, for the driver calls
  CUmodule pull_module;
  CU_CHECK(driver_entry<decltype(&cuModuleLoadData)>("cuModuleLoadData")(&pull_module, kPullPtx));
  CU_CHECK(driver_entry<decltype(&cuModuleGetFunction)>("cuModuleGetFunction")(&g_pull, pull_module,
                                                                               "cmt_pull"));
  CUmodule spin_module;
  CU_CHECK(driver_entry<decltype(&cuModuleLoadData)>("cuModuleLoadData")(&spin_module, kSpinPtx));
  CU_CHECK(driver_entry<decltype(&cuModuleGetFunction)>("cuModuleGetFunction")(&g_spin, spin_module,
                                                                               "cmt_spin"));
  g_launch = driver_entry<decltype(&cuLaunchKernel)>("cuLaunchKernel");
  const std::size_t max_bytes = *std::max_element(opt.sizes.begin(), opt.sizes.end());
  const std::size_t ring_bytes = opt.chunk * static_cast<std::size_t>(opt.slots);
  char* dev = nullptr;
  char* pinned = nullptr;
  CHECK(cudaMalloc(reinterpret_cast<void**>(&dev), max_bytes));
  CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned), max_bytes));
  std::memset(pinned, 1, max_bytes);
  // Pageable: what the staged modes copy from (H2D) and into (D2H).
  std::vector<char> source(max_bytes, 3), drained(max_bytes, 4);
  cudaStream_t stream, second;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&second, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  std::vector<cudaEvent_t> events(static_cast<std::size_t>(opt.slots));
  for (auto& e : events) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  Ring registered(RingKind::Registered, ring_bytes), allocated(RingKind::Allocated, ring_bytes),
      combined(RingKind::WriteCombined, ring_bytes);

  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf(
      "cmt-bench-dma  %s  GPU: %s  %s x %d slots, %d reps, busy: %d CPU threads, staged: %s, %d "
      "units per piece%s%s\n",
      date, prop.name, size_text(opt.chunk).c_str(), opt.slots, opt.reps, opt.cpu_threads,
      opt.staging_nt ? "nt" : "memcpy", opt.units ? opt.units : std::max(opt.cpu_threads, 1),
      opt.flush_ring ? ", ring flushed" : "", opt.ring_wc ? ", write-combined ring" : "");

  std::vector<Result> results;
  for (std::size_t bytes : opt.sizes)
    for (bool h2d : {true, false})
      for (const std::string& m : opt.modes) {
        const bool pull = m == "pull" || m == "pullnt" || m == "pullstaged";
        // The CPU reads write-combined memory very slowly; the kernel only pulls.
        if ((m == "wc" || pull) && !h2d) continue;
        if (m == "regfresh" && h2d) continue;
        if (pull && opt.ring_wc)
          continue;  // the write-combined ring has no device mapping  // a fresh buffer has nothing
                     // to send
        const bool staged = m == "staged" || m == "staged2" || m == "pullstaged";
        Result r{bytes, h2d ? "h2d" : "d2h", m.c_str(), {}};
        std::unique_ptr<BusyCpus> busy;
        if (m == "busy" || m == "busynt" || m == "twont" || m == "busyreg" || m == "pullnt")
          busy =
              std::make_unique<BusyCpus>(opt.cpu_threads, 64u << 20, m != "busy", m == "busyreg");
        const bool two = m == "two" || m == "twont" || m == "staged2";
        // The kernel must move every byte for its time to mean anything: the warm-up rep starts
        // from a cleared device buffer and is checked against what the ring held (the staged
        // mode's source, else the ring's fill).
        if (pull) {
          CHECK(cudaMemset(dev, 0, bytes));
          if (!staged) std::memset(registered.data, 1, registered.bytes);  // other modes wrote it
        }
        cudaStream_t other = two ? second : nullptr;
        Ring& ring = m == "alloc" ? allocated : m == "wc" ? combined : registered;
        for (int rep = -1; rep < opt.reps; ++rep) {  // rep -1 warms up
          double s;
          char* user = h2d ? source.data() : drained.data();
          if (m == "one") {
            s = time_one(h2d, dev, pinned, bytes, stream);
          } else if (m == "pageable") {
            s = time_one(h2d, dev, user, bytes, stream);
          } else if (m == "chain") {
            s = time_chain(h2d, dev, pinned, opt.chunk, bytes, stream);
          } else if (m == "reg" || m == "regonly") {
            s = time_register(h2d, dev, user, bytes, stream, m == "reg");
          } else if (m == "regbusy") {
            unsigned long long ns = 20000000ull;
            void* args[] = {&ns};
            CU_CHECK(g_launch(g_spin, 1, 1, 1, 1, 1, 1, 0, second, args, nullptr));
            s = time_register(h2d, dev, user, bytes, stream, true);
            CHECK(cudaStreamSynchronize(second));
          } else if (m == "regpieces") {
            s = time_register_pieces(h2d, dev, user, bytes, opt.chunk, opt.cpu_threads, stream);
          } else if (m == "regfresh") {
            void* fresh =
                mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (fresh == MAP_FAILED) usage("cannot map a fresh destination");
            s = time_register_pieces(false, dev, static_cast<char*>(fresh), bytes, opt.chunk,
                                     opt.cpu_threads, stream);
            munmap(fresh, bytes);
          } else if (staged) {
            s = time_staged(h2d, dev, user, opt.ring_wc ? combined : registered, opt.chunk,
                            opt.slots, events, bytes, stream, other, fork, join, opt.cpu_threads,
                            opt.units, opt.staging_nt, pull, opt.flush_ring);
          } else {
            s = time_pieces(h2d, dev, ring, opt.chunk, opt.slots, events, bytes, stream, other,
                            fork, join, pull);
          }
          if (rep == -1 && !h2d && staged) {  // the drain must have delivered the device's bytes
            std::vector<char> want(bytes);
            CHECK(cudaMemcpy(want.data(), dev, bytes, cudaMemcpyDeviceToHost));
            if (std::memcmp(want.data(), user, bytes) != 0) {
              std::fprintf(stderr, "cmt-bench-dma: %s drained wrong bytes\n", m.c_str());
              return 1;
            }
          }
          // Registration moves the user's own bytes: check them once, past the partial pages.
          if (rep == -1 && h2d && (m == "reg" || m == "regpieces" || m == "regbusy")) {
            auto [p, n] = whole_pages(user, bytes);
            check_device(dev + (p - user), n, 3, m);
          }
          if (rep >= 0) r.gbps.push_back(static_cast<double>(bytes) / s / 1e9);
          if (pull && rep == -1) check_device(dev, bytes, staged ? 3 : 1, m);
        }
        results.push_back(r);
      }

  std::printf("%6s %4s %8s %8s %15s %8s\n", "size", "dir", "mode", "GB/s", "[min-max]", "/ one");
  double one = 0;
  for (const Result& r : results) {
    if (std::string(r.mode) == "one") one = r.median();
    auto [lo, hi] = std::minmax_element(r.gbps.begin(), r.gbps.end());
    std::printf("%6s %4s %8s %8.1f [%5.1f-%5.1f] %8.2f\n", size_text(r.bytes).c_str(), r.dir,
                r.mode, r.median(), *lo, *hi, one > 0 ? r.median() / one : 0.0);
  }
  if (!opt.json.empty()) {
    std::ofstream out(opt.json);
    out << "{\n \"benchmark\": \"cmt-bench-dma\",\n \"date\": \"" << date << "\",\n \"gpu\": \""
        << prop.name << "\",\n \"chunk\": " << opt.chunk << ",\n \"slots\": " << opt.slots
        << ",\n \"reps\": " << opt.reps << ",\n \"cpu_threads\": " << opt.cpu_threads
        << ",\n \"staging\": \"" << (opt.staging_nt ? "nt" : "memcpy")
        << "\",\n \"units_per_piece\": " << (opt.units ? opt.units : std::max(opt.cpu_threads, 1))
        << ",\n \"flush_ring\": " << (opt.flush_ring ? "true" : "false") << ",\n \"ring\": \""
        << (opt.ring_wc ? "wc" : "wb") << "\",\n \"results\": [";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      out << (i ? "," : "") << "\n  {\"bytes\": " << r.bytes << ", \"direction\": \"" << r.dir
          << "\", \"mode\": \"" << r.mode << "\", \"median_gbps\": " << r.median()
          << ", \"gbps\": [";
      for (std::size_t k = 0; k < r.gbps.size(); ++k) out << (k ? ", " : "") << r.gbps[k];
      out << "]}";
    }
    out << "\n ]\n}\n";
    if (!out) {
      std::fprintf(stderr, "cmt-bench-dma: cannot write %s\n", opt.json.c_str());
      return 1;
    }
  }
  for (auto& e : events) cudaEventDestroy(e);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(second);
  cudaStreamDestroy(stream);
  cudaFreeHost(pinned);
  cudaFree(dev);
  return 0;
}
