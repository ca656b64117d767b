// memcpy, memmove and memset calls, checked byte for byte, for host_copy.sh. First every size up
// to 4096 bytes at every alignment and many overlaps (the hook copies small ones itself), every
// memset size to 4096, and
// fills of new 16 MiB mappings. Then random calls: each thread copies
// between two pageable buffers and a CUDA host (pinned) buffer, at random sizes (1 B to 8 MiB),
// offsets and directions, memcpy and memmove also within one buffer with overlapping ranges, the fortified
// forms. Every call is repeated on mirror buffers with the C library's own functions (looked up in
// libc.so.6 itself, past any preload), and the destination with 64 bytes either side must match.
// A timer signal's handler makes large copies of its own meanwhile, and a forked child copies too.
// Last, file reads into the pinned buffer and elsewhere (read, pread, pread64 and their fortified
// forms, readv, preadv and preadv2 with segments in both, across the end of the file, from a
// pipe, in a forked child), checked against the file's bytes and offsets.
// Linked against the fake libcuda (fake_libcuda_engine.cpp), or the real one for the GPU machine:
// its cuMemAllocHost reaches libcmt.so's host-memory hook when preloaded. Exit 77 without a GPU.
//
// usage: host_copy_app THREADS CALLS SEED THRESHOLD
// Prints "calls N large N large_pinned N wrong 0 ..."; exits 1 on any difference.
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern "C" void* __memcpy_chk(void*, const void*, std::size_t, std::size_t);
extern "C" void* __memmove_chk(void*, const void*, std::size_t, std::size_t);
extern "C" void* __memset_chk(void*, int, std::size_t, std::size_t);
extern "C" ssize_t __read_chk(int, void*, std::size_t, std::size_t);
extern "C" ssize_t __pread_chk(int, void*, std::size_t, off_t, std::size_t);
extern "C" ssize_t __pread64_chk(int, void*, std::size_t, off_t, std::size_t);
extern "C" std::size_t __fread_chk(void*, std::size_t, std::size_t, std::size_t, FILE*);
extern "C" std::size_t __fread_unlocked_chk(void*, std::size_t, std::size_t, std::size_t, FILE*);

namespace {

using CopyFn = void* (*)(void*, const void*, std::size_t);
using FillFn = void* (*)(void*, int, std::size_t);
CopyFn g_libc_memmove = nullptr;
using FreadFn = std::size_t (*)(void*, std::size_t, std::size_t, FILE*);
FreadFn g_libc_fread = nullptr;
FillFn g_libc_memset = nullptr;

constexpr std::size_t kBuffer = 24u << 20;
constexpr std::size_t kGuard = 64;
constexpr std::size_t kMaxCopy = 8u << 20;

std::atomic<long> g_calls{0}, g_large{0}, g_large_pinned{0}, g_wrong{0};
std::atomic<long> g_fills{0}, g_large_fills{0}, g_fresh_fills{0};
std::size_t g_threshold = 0;

// Real buffers and their mirrors, one set per thread.
struct Buffers {
  unsigned char* real[3];    // pageable A, pageable B, pinned P
  unsigned char* mirror[3];  // the same content, kept by libc
};

void fill(unsigned char* p, std::size_t n, std::mt19937_64& rng) {
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t v = rng();
    std::size_t k = n - i < 8 ? n - i : 8;
    for (std::size_t j = 0; j < k; ++j) p[i + j] = static_cast<unsigned char>(v >> (8 * j));
  }
}

std::size_t random_size(std::mt19937_64& rng) {
  // Log-uniform from 1 B to 8 MiB: small calls (libc's) and large ones (cmt's) both plentiful.
  double e = std::uniform_real_distribution<double>(0.0, 23.0)(rng);
  std::size_t n = static_cast<std::size_t>(std::exp2(e));
  return n < 1 ? 1 : n > kMaxCopy ? kMaxCopy : n;
}

void one_call(Buffers& b, std::mt19937_64& rng, int thread) {
  const int from = static_cast<int>(rng() % 3);
  const int op = static_cast<int>(rng() % 7);  // 0-1 memcpy, 2-3 memmove, 4 either within one buffer,
                                               // 5 _chk, 6 memset (or __memset_chk)
  int to = static_cast<int>(rng() % 3);
  if (op != 4 && to == from) to = (to + 1) % 3;
  if (op == 4) to = from;
  const std::size_t n = random_size(rng);
  const std::size_t room = kBuffer - 2 * kGuard;
  std::size_t src_off = kGuard + rng() % (room - n);
  std::size_t dst_off = kGuard + rng() % (room - n);
  if (op == 4) {  // overlapping: the destination within n of the source, either side
    std::size_t shift = 1 + rng() % n;
    if (rng() % 2 && src_off + shift + n <= kGuard + room)
      dst_off = src_off + shift;
    else if (src_off >= kGuard + shift)
      dst_off = src_off - shift;
  }
  unsigned char* d = b.real[to] + dst_off;
  const unsigned char* s = b.real[from] + src_off;
  unsigned char* md = b.mirror[to] + dst_off;
  const unsigned char* ms = b.mirror[from] + src_off;
  const bool overlap = d < s + n && s < d + n;
  switch (op) {
    case 0:
    case 1:
      std::memcpy(d, s, n);
      break;
    case 2:
    case 3:
      std::memmove(d, s, n);
      break;
    case 4:  // glibc's x86-64 memcpy moves overlapping ranges as memmove does; programs rely on it
      if (rng() % 2)
        std::memcpy(d, s, n);
      else
        std::memmove(d, s, n);
      break;
    case 5:
      if (rng() % 2)
        __memcpy_chk(d, s, n, n + rng() % 64);
      else
        __memmove_chk(d, s, n, n + rng() % 64);
      break;
    default: {
      const int value = static_cast<int>(rng() % 256);
      if (rng() % 2)
        std::memset(d, value, n);
      else
        __memset_chk(d, value, n, n + rng() % 64);
      g_libc_memset(md, value, n);
      g_fills.fetch_add(1);
      if (n >= g_threshold) g_large_fills.fetch_add(1);
      if (std::memcmp(d - kGuard, md - kGuard, n + 2 * kGuard) != 0) {
        g_wrong.fetch_add(1);
        std::fprintf(stderr, "thread %d: memset of %zu bytes at %d+%zu differs\n", thread, n, to,
                     dst_off);
      }
      return;
    }
  }
  g_libc_memmove(md, ms, n);
  g_calls.fetch_add(1);
  if (n >= g_threshold && !overlap) {
    g_large.fetch_add(1);
    if (to == 2 || from == 2) g_large_pinned.fetch_add(1);
  }
  if (std::memcmp(d - kGuard, md - kGuard, n + 2 * kGuard) != 0) {
    g_wrong.fetch_add(1);
    std::fprintf(stderr, "thread %d: op %d of %zu bytes %d+%zu -> %d+%zu differs\n", thread, op, n,
                 from, src_off, to, dst_off);
  }
  // Now and then, fresh content, so later copies do not move equal bytes around.
  if (rng() % 64 == 0) {
    fill(b.real[to] + dst_off, n, rng);
    g_libc_memmove(b.mirror[to] + dst_off, b.real[to] + dst_off, n);
  }
}

// Every size from 0 to 4096 bytes (the hook copies up to 128 itself, and jumps to libc's function
// above) through memcpy, memmove and the fortified forms, against libc, buffer-wide: up to 256
// bytes at 32 source offsets with the destination at every shift across the source and apart;
// beyond, at every source alignment in a cache line, the destination at another alignment apart,
// and overlapping by one byte, half and all but one either way.
long small_sizes_wrong() {
  constexpr std::size_t kArea = 3 * 4096 + 1024;
  std::vector<unsigned char> real(kArea), mirror(kArea);
  std::mt19937_64 rng(3);
  long wrong = 0;
  auto both = [&](std::size_t d, std::size_t s, std::size_t n, int how) {
    if (how == 0)
      std::memmove(real.data() + d, real.data() + s, n);
    else if (how == 1)
      std::memcpy(real.data() + d, real.data() + s, n);
    else if (how == 2)
      __memmove_chk(real.data() + d, real.data() + s, n, n + 3);
    else
      __memcpy_chk(real.data() + d, real.data() + s, n, n);
    g_libc_memmove(mirror.data() + d, mirror.data() + s, n);
  };
  auto check = [&](std::size_t n, std::size_t so) {
    if (std::memcmp(real.data(), mirror.data(), kArea) == 0) return;
    ++wrong;
    std::fprintf(stderr, "small copies of %zu bytes at %zu differ\n", n, so);
    g_libc_memmove(real.data(), mirror.data(), kArea);
  };
  for (std::size_t n = 0; n <= 4096; ++n) {
    if (n % 64 == 0) {
      fill(real.data(), kArea, rng);
      g_libc_memmove(mirror.data(), real.data(), kArea);
    }
    if (n <= 256) {
      for (std::size_t so = 300; so < 332; ++so) {
        for (long shift = -static_cast<long>(n) - 2; shift <= static_cast<long>(n) + 2; ++shift)
          both(static_cast<std::size_t>(static_cast<long>(so) + shift), so, n,
               static_cast<int>(shift & 3));
        both(so + 600 + n % 7, so, n, static_cast<int>(n & 3));
        check(n, so);
      }
      continue;
    }
    const long half = static_cast<long>(n / 2), most = static_cast<long>(n) - 1;
    for (std::size_t a = 0; a < 64; ++a) {
      const std::size_t so = 4096 + 64 + a;
      both(2 * 4096 + 128 + (a * 5 + n) % 64, so, n, static_cast<int>((a + n) & 3));
      for (long shift : {-most, -half, -1L, 1L, half, most})
        both(static_cast<std::size_t>(static_cast<long>(so) + shift), so, n,
             static_cast<int>(a & 1));
      check(n, so);
    }
  }
  return wrong;
}

// Every memset size from 0 to 4096 bytes (and __memset_chk's), against libc: up to 256 at 32
// offsets, beyond at every alignment in a cache line, each with another value (an int, as C
// passes it, negative or past 255 now and then).
long small_fills_wrong() {
  constexpr std::size_t kArea = 4096 + 1024;
  std::vector<unsigned char> real(kArea), mirror(kArea);
  std::mt19937_64 rng(4);
  long wrong = 0;
  fill(real.data(), kArea, rng);
  g_libc_memmove(mirror.data(), real.data(), kArea);
  for (std::size_t n = 0; n <= 4096; ++n)
    for (std::size_t at = 100; at < (n <= 256 ? 132u : 164u); ++at) {
      const int value = static_cast<int>(rng() % 512) - (n % 3 == 0 ? 256 : 0);
      if (at % 2)
        std::memset(real.data() + at, value, n);
      else
        __memset_chk(real.data() + at, value, n, n + at % 5);
      g_libc_memset(mirror.data() + at, value, n);
      if (std::memcmp(real.data(), mirror.data(), kArea) != 0) {
        ++wrong;
        std::fprintf(stderr, "small memset of %zu bytes at %zu differs\n", n, at);
        g_libc_memmove(real.data(), mirror.data(), kArea);
      }
    }
  return wrong;
}

// New memory filled: each fill into a fresh mapping, as a new buffer's zero-fill; checked.
long fresh_fills_wrong(int count) {
  long wrong = 0;
  for (int i = 0; i < count; ++i) {
    const std::size_t n = (16u << 20) + static_cast<std::size_t>(i) * 4099;
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    auto* b = static_cast<unsigned char*>(p);
    const unsigned char value = static_cast<unsigned char>(i * 37 + 1);
    std::memset(b + 3, value, n - 3);
    g_fresh_fills.fetch_add(1);
    for (std::size_t k = 0; k < n; ++k)
      if (b[k] != (k < 3 ? 0 : value)) {
        ++wrong;
        std::fprintf(stderr, "fresh fill %d differs at %zu\n", i, k);
        break;
      }
    munmap(p, n);
  }
  return wrong;
}

// The signal handler's own copies: into a region of the pinned buffer that nothing else uses.
unsigned char* g_signal_src = nullptr;
unsigned char* g_signal_dst = nullptr;
constexpr std::size_t kSignalCopy = 1u << 20;
std::atomic<long> g_signal_copies{0}, g_signal_wrong{0};

void on_timer(int) {
  std::memset(g_signal_dst, 0, kSignalCopy);
  std::memcpy(g_signal_dst, g_signal_src, kSignalCopy);
  if (std::memcmp(g_signal_dst, g_signal_src, kSignalCopy) != 0) g_signal_wrong.fetch_add(1);
  g_signal_copies.fetch_add(1);
}

long g_reads = 0, g_large_reads = 0, g_large_plain_reads = 0, g_freads_large = 0;
std::atomic<long> g_shared_reads{0};  // large reads racing on one descriptor: cmt may take any

// Writes `bytes` to a new file and returns its name (removed by freads_wrong).
std::string name_for_freads(const unsigned char* bytes, std::size_t size) {
  char name[] = "/tmp/cmt-host-fread-XXXXXX";
  const int w = mkstemp(name);
  if (w < 0) return {};
  const bool ok = write(w, bytes, size) == static_cast<ssize_t>(size);
  close(w);
  return ok ? name : std::string();
}

// fread into pinned memory (the host leg may take the large ones) against fread of the same file
// into ordinary memory (which it never takes), on two streams, step by step: small freads, fgetc,
// ungetc, ftell, fseek, large freads with and without bytes in the stream's buffer, elements of
// odd sizes, across the end of the file; after each step the counts, the bytes, ftell, feof and
// ferror must agree. Returns the steps that differed.
long freads_wrong(const std::string& name, unsigned char* pinned, std::size_t room,
                  std::mt19937_64& rng) {
  if (name.empty()) return 1;
  FILE* a = std::fopen(name.c_str(), "rb");
  FILE* b = std::fopen(name.c_str(), "rb");
  unlink(name.c_str());
  if (!a || !b) return 1;
  std::unique_ptr<unsigned char[]> plain(new unsigned char[room]);
  long wrong = 0;
  const long size = [&] {
    std::fseek(b, 0, SEEK_END);
    const long s = std::ftell(b);
    std::rewind(b);
    return s;
  }();
  for (int step = 0; step < 400; ++step) {
    const int what = static_cast<int>(rng() % 10);
    std::size_t ra = 0, rb = 0, n = 0;
    if (what < 4) {  // large: from 256 KiB to 3 MiB, elements of 1, 3 or 4096 bytes
      const std::size_t elem = what == 0 ? 3 : what == 1 ? 4096 : 1;
      n = (256u << 10) + rng() % (3u << 20);
      n = std::min(n, room) / elem;
      if (what == 3) {  // fread_unlocked, the stream locked by the caller as stdio's users do
        flockfile(a);
        ra = step % 2 ? fread_unlocked(pinned, elem, n, a)
                      : __fread_unlocked_chk(pinned, room, elem, n, a);
        funlockfile(a);
      } else if (what == 2) {
        ra = __fread_chk(pinned, room, elem, n, a);
      } else {
        ra = std::fread(pinned, elem, n, a);
      }
      rb = std::fread(plain.get(), elem, n, b);
      if (ra != rb || std::memcmp(pinned, plain.get(), ra * elem) != 0) {
        ++wrong;
        std::size_t at = 0;
        while (at < ra * elem && pinned[at] == plain[at]) ++at;
        std::fprintf(stderr, "fread step %d: %zu x %zu: %zu against libc's %zu, first difference at %zu\n", step, n, elem,
                     ra, rb, at);
      }
      ++g_reads;
      if (n * elem >= (512u << 10)) ++g_freads_large;
    } else if (what < 6) {  // small
      n = 1 + rng() % 9000;
      ra = std::fread(pinned, 1, n, a);
      rb = std::fread(plain.get(), 1, n, b);
      if (ra != rb || std::memcmp(pinned, plain.get(), ra) != 0) ++wrong;
    } else if (what == 6) {
      const int ca = std::fgetc(a), cb = std::fgetc(b);
      if (ca != cb) ++wrong;
      if (ca != EOF && rng() % 2) {
        std::ungetc(ca, a);
        std::ungetc(cb, b);
      }
    } else if (what == 7) {
      const long to = static_cast<long>(rng() % static_cast<unsigned long>(size + 100));
      std::fseek(a, to, SEEK_SET);
      std::fseek(b, to, SEEK_SET);
    } else if (what == 8) {
      std::fseek(a, -1000, SEEK_END);
      std::fseek(b, -1000, SEEK_END);
    } else {
      std::clearerr(a);
      std::clearerr(b);
    }
    if (std::ftell(a) != std::ftell(b) || std::feof(a) != std::feof(b) ||
        std::ferror(a) != std::ferror(b)) {
      ++wrong;
      std::fprintf(stderr, "fread step %d (%d): ftell %ld/%ld feof %d/%d ferror %d/%d\n", step,
                   what, std::ftell(a), std::ftell(b), std::feof(a), std::feof(b), std::ferror(a),
                   std::ferror(b));
    }
  }
  std::fclose(a);
  std::fclose(b);
  return wrong;
}

// readv, preadv and preadv2 of 1-4 segments, each in the pinned or the plain buffer (apart), at
// random sizes and offsets, many past the end of the file: what they return, the segments' bytes
// and readv's offset must be the kernel's. A segment of 512 KiB or more in pinned memory is read
// on cmt's threads if the call reaches it (every segment before it full): counted in
// g_large_reads (in the plain buffer: g_large_plain_reads, read so with host_copy = all), as
// host_copy.sh compares with cmt's count.
long readvs_wrong(int fd, const unsigned char* file, std::size_t size, unsigned char* pinned,
                  unsigned char* plain, std::size_t room, std::mt19937_64& rng) {
  const std::size_t large = 512u << 10, part = std::min<std::size_t>(room / 4, 2u << 20);
  long wrong = 0;
  for (int i = 0; i < 60; ++i) {
    iovec segs[4];
    const int count = 1 + static_cast<int>(rng() % 4);
    const int kind = i % 3;  // readv, preadv, preadv2 (at an offset, or -1: readv's)
    off_t at = static_cast<off_t>(rng() % (size + 4096));
    if (kind == 0 || (kind == 2 && i % 2 == 0)) {
      at = lseek(fd, at, SEEK_SET);
    }
    const bool moves = kind == 0 || (kind == 2 && i % 2 == 0);
    std::size_t total = 0;
    for (int k = 0; k < count; ++k) {
      const std::size_t n = 1 + rng() % part;
      unsigned char* base = (rng() % 2 ? pinned : plain) + static_cast<std::size_t>(k) * part;
      segs[k] = {base, n};
      if (n >= large && at + static_cast<off_t>(total) <= static_cast<off_t>(size))
        ++(base >= pinned && base < pinned + room ? g_large_reads : g_large_plain_reads);
      total += n;
    }
    ssize_t got = kind == 0   ? readv(fd, segs, count)
                  : kind == 1 ? preadv(fd, segs, count, at)
                  : moves     ? preadv2(fd, segs, count, -1, 0)
                              : preadv2(fd, segs, count, at, 0);
    ++g_reads;
    const std::size_t want =
        at >= static_cast<off_t>(size) ? 0 : std::min(total, size - static_cast<std::size_t>(at));
    std::size_t checked = 0;
    bool same = got == static_cast<ssize_t>(want);
    for (int k = 0; k < count && same && checked < want; ++k) {
      const std::size_t n = std::min(segs[k].iov_len, want - checked);
      same = std::memcmp(segs[k].iov_base, file + at + checked, n) == 0;
      checked += n;
    }
    const off_t offset = lseek(fd, 0, SEEK_CUR);
    if (moves && offset != at + static_cast<off_t>(want)) same = false;
    if (!same) {
      ++wrong;
      std::fprintf(stderr, "%s of %d segments, %zu bytes at %lld: %zd bytes, want %zu; offset %lld\n",
                   kind == 0 ? "readv" : kind == 1 ? "preadv" : "preadv2", count, total,
                   static_cast<long long>(at), got, want, static_cast<long long>(offset));
    }
  }
  return wrong;
}

// Three threads read() one descriptor at once into their own parts of the pinned buffer, as the
// kernel orders such reads: each gets bytes of its own, so together they read the file exactly
// once (each word of it its own index, so a read's first word says where it read). Returns the
// reads that went wrong.
long shared_reads_wrong(unsigned char* pinned, std::size_t room) {
  const std::size_t words = (20u << 20) / 8 + 5, size = words * 8;
  std::unique_ptr<std::uint64_t[]> index(new std::uint64_t[words]);
  for (std::size_t i = 0; i < words; ++i) index[i] = i;
  char name[] = "/tmp/cmt-host-shared-XXXXXX";
  const int w = mkstemp(name);
  if (w < 0) return 1;
  const bool written = write(w, index.get(), size) == static_cast<ssize_t>(size);
  close(w);
  const int fd = written ? open(name, O_RDONLY) : -1;
  unlink(name);
  if (fd < 0) return 1;
  const std::size_t part = room / 3 / 8 * 8;
  std::mutex mu;
  std::vector<std::pair<std::uint64_t, std::size_t>> got;  // (first word, bytes) of each read
  std::atomic<long> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&, t] {
      auto* buf = reinterpret_cast<std::uint64_t*>(pinned + part * static_cast<std::size_t>(t));
      const std::size_t n = std::min(part, (1u << 20) + 8 * 41 * static_cast<std::size_t>(t + 1));
      for (;;) {
        const ssize_t bytes = read(fd, buf, n);
        ++g_shared_reads;  // the last, at the end of the file, too
        if (bytes <= 0) break;
        for (std::size_t i = 1; i < static_cast<std::size_t>(bytes) / 8; ++i)
          if (buf[i] != buf[0] + i) {
            ++wrong;
            break;
          }
        std::lock_guard<std::mutex> lk(mu);
        got.emplace_back(buf[0], static_cast<std::size_t>(bytes));
      }
    });
  for (auto& r : readers) r.join();
  close(fd);
  std::sort(got.begin(), got.end());
  std::size_t at = 0;
  for (const auto& [first, bytes] : got) {
    if (first * 8 != at) ++wrong;  // read twice, or never
    at = std::max(at, static_cast<std::size_t>(first * 8 + bytes));
  }
  if (at != size) ++wrong;
  if (wrong) std::fprintf(stderr, "reads of one descriptor from three threads: %ld wrong\n", wrong.load());
  return wrong;
}

// File reads: the host leg takes those of a regular file into CUDA host memory from 512 KiB
// (`large_reads` counts them); every one must return what libc's would, and read's must move the
// descriptor's offset as libc's does. Returns the reads that differed.

// A read larger than one read() can move: the kernel moves at most 0x7ffff000 bytes a call, so a
// read() of more returns that many (cmt's as the kernel's), where an fread() goes on until it has
// them all, as glibc's loops. The file is sparse: written at its start, around that limit and at
// its end, holes between (zeros); the buffer is ordinary memory (host_reads = all takes it).
long past_the_read_limit_wrong() {
  constexpr std::size_t kLimit = 0x7ffff000, kPiece = 1u << 20;
  const std::size_t size = kLimit + (3u << 20) + 123;
  char name[] = "/tmp/cmt-host-bigread-XXXXXX";
  const int w = mkstemp(name);
  if (w < 0) return 1;
  unlink(name);
  std::vector<unsigned char> piece(kPiece);
  const std::size_t written[] = {0, kLimit - kPiece / 2, size - kPiece};
  for (std::size_t at : written) {
    for (std::size_t i = 0; i < kPiece; ++i)
      piece[i] = static_cast<unsigned char>((at + i) * 7 + 1);
    if (pwrite(w, piece.data(), kPiece, static_cast<off_t>(at)) != static_cast<ssize_t>(kPiece))
      return 1;
  }
  if (ftruncate(w, static_cast<off_t>(size)) != 0) return 1;
  auto* buf = static_cast<unsigned char*>(std::malloc(size));
  if (!buf) return 1;
  long wrong = 0;
  auto bytes_wrong = [&](std::size_t got, const char* what) {
    for (std::size_t at : written)
      for (std::size_t i = 0; i < kPiece && at + i < got; i += 4093)
        if (buf[at + i] != static_cast<unsigned char>((at + i) * 7 + 1)) {
          std::fprintf(stderr, "%s past the read limit: byte %zu differs\n", what, at + i);
          return 1L;
        }
    for (std::size_t at = kPiece; at + kPiece < got; at += 97 << 20)
      if (at + 1 < written[1] || at > written[1] + kPiece)
        if (buf[at]) {
          std::fprintf(stderr, "%s past the read limit: byte %zu of a hole is not 0\n", what, at);
          return 1L;
        }
    return 0L;
  };
  ++g_reads, ++g_large_plain_reads;
  const ssize_t got = pread(w, buf, size, 0);
  if (got != static_cast<ssize_t>(kLimit)) {
    std::fprintf(stderr, "pread of %zu: %zd bytes, want the kernel's %zu\n", size, got, kLimit);
    ++wrong;
  }
  wrong += bytes_wrong(got > 0 ? static_cast<std::size_t>(got) : 0, "pread");
  std::memset(buf, 0xee, size);
  FILE* f = fdopen(w, "rb");
  if (!f) return wrong + 1;
  ++g_freads_large;
  const std::size_t n = std::fread(buf, 1, size, f);
  if (n != size || std::feof(f) || std::ferror(f) || std::ftell(f) != static_cast<long>(size)) {
    std::fprintf(stderr, "fread of %zu: %zu bytes, eof %d, error %d, at %ld\n", size, n,
                 std::feof(f), std::ferror(f), std::ftell(f));
    ++wrong;
  }
  wrong += bytes_wrong(n, "fread");
  if (std::fread(buf, 1, 1, f) != 0 || !std::feof(f)) {
    std::fprintf(stderr, "fread after the end of the file: no end of file\n");
    ++wrong;
  }
  std::fclose(f);
  std::free(buf);
  return wrong;
}

// An fread into a buffer that ends at a PROT_NONE page, asking for more than fits: the kernel's
// read copies up to the bad page and says so, and glibc's fread reads on, meets EFAULT and flags
// an error. cmt's fread (which host_reads = all takes, this being ordinary memory) must answer as
// libc's own, called past the preload on a second stream of the same file: the count, the error
// and end-of-file flags, errno, the stream's position and the bytes read.
long fread_into_guard_wrong() {
  const std::size_t room = 2u << 20, file_size = 6u << 20, ask = 3u << 20;
  char name[] = "/tmp/cmt-host-guard-XXXXXX";
  const int w = mkstemp(name);
  if (w < 0) return 1;
  std::vector<unsigned char> bytes(file_size);
  for (std::size_t i = 0; i < file_size; ++i) bytes[i] = static_cast<unsigned char>(i * 13 + 5);
  const bool written = write(w, bytes.data(), file_size) == static_cast<ssize_t>(file_size);
  close(w);
  FILE* ours = written ? std::fopen(name, "rb") : nullptr;
  FILE* libcs = written ? std::fopen(name, "rb") : nullptr;
  unlink(name);
  if (!ours || !libcs) return 1;
  long wrong = 0;
  std::size_t got[2] = {};
  int error[2] = {}, eof[2] = {}, err_no[2] = {};
  long at[2] = {};
  for (int k = 0; k < 2; ++k) {
    void* map =
        mmap(nullptr, room + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return wrong + 1;
    auto* buf = static_cast<unsigned char*>(map);
    mprotect(buf + room, 4096, PROT_NONE);
    FILE* f = k ? libcs : ours;
    errno = 0;
    got[k] = k ? g_libc_fread(buf, 1, ask, f) : std::fread(buf, 1, ask, f);
    err_no[k] = errno;
    error[k] = std::ferror(f);
    eof[k] = std::feof(f);
    at[k] = std::ftell(f);
    if (std::memcmp(buf, bytes.data(), std::min(got[k], room)) != 0) {
      std::fprintf(stderr, "fread beside a bad page (%s): bytes differ\n", k ? "libc" : "cmt");
      ++wrong;
    }
    munmap(map, room + 4096);
  }
  if (got[0] != got[1] || error[0] != error[1] || eof[0] != eof[1] || err_no[0] != err_no[1] ||
      at[0] != at[1]) {
    std::fprintf(stderr,
                 "fread beside a bad page: %zu bytes, error %d, eof %d, errno %d, at %ld; "
                 "libc's %zu, %d, %d, %d, %ld\n",
                 got[0], error[0], eof[0], err_no[0], at[0], got[1], error[1], eof[1], err_no[1],
                 at[1]);
    ++wrong;
  }
  ++g_freads_large;
  std::fclose(ours);
  std::fclose(libcs);
  return wrong;
}

// Counts that run past the top of the address space (a program's SIZE_MAX for "all of it"): the
// kernel says EFAULT before it reads anything, the offset unmoved, and so must cmt's read, pread
// and readv (cmt's threads would read the file into the buffer and on past its end). Compared
// with the system calls themselves. Returns the calls that differed.
long past_the_top_wrong(int fd, unsigned char* pinned) {
  long wrong = 0;
  const std::size_t counts[] = {SIZE_MAX, SIZE_MAX / 2, std::size_t{1} << 62};
  for (const std::size_t n : counts) {
    for (int kind = 0; kind < 3; ++kind) {
      long got[2];
      int err[2];
      off_t at[2];
      iovec seg{pinned, n};
      for (int k = 0; k < 2; ++k) {
        lseek(fd, 0, SEEK_SET);
        errno = 0;
        if (kind == 0) got[k] = k ? syscall(SYS_read, fd, pinned, n) : read(fd, pinned, n);
        if (kind == 1)
          got[k] = k ? syscall(SYS_pread64, fd, pinned, n, 0) : pread(fd, pinned, n, 0);
        if (kind == 2) got[k] = k ? syscall(SYS_readv, fd, &seg, 1) : readv(fd, &seg, 1);
        err[k] = errno;
        at[k] = lseek(fd, 0, SEEK_CUR);
      }
      ++g_reads;
      if (got[0] != got[1] || err[0] != err[1] || at[0] != at[1]) {
        ++wrong;
        std::fprintf(stderr, "%s of %zu: %ld, errno %d, offset %lld; the kernel's %ld, %d, %lld\n",
                     kind == 0   ? "read"
                     : kind == 1 ? "pread"
                                 : "readv",
                     n, got[0], err[0], static_cast<long long>(at[0]), got[1], err[1],
                     static_cast<long long>(at[1]));
      }
    }
  }
  return wrong;
}

long reads_wrong(unsigned char* pinned, std::size_t room, std::mt19937_64& rng) {
  const std::size_t size = (6u << 20) + 4321, large = 512u << 10;
  // Not zero-filled first (a vector's memset of new memory would be one more fresh fill for cmt).
  std::unique_ptr<unsigned char[]> file_bytes(new unsigned char[size]);
  unsigned char* const bytes_data = file_bytes.get();
  fill(bytes_data, size, rng);
  char name[] = "/tmp/cmt-host-read-XXXXXX";
  const int w = mkstemp(name);
  if (w < 0 || write(w, bytes_data, size) != static_cast<ssize_t>(size)) return 1;
  close(w);
  const int fd = open(name, O_RDONLY);
  unlink(name);
  if (fd < 0) return 1;
  long wrong = 0;
  std::unique_ptr<unsigned char[]> plain(new unsigned char[room]);
  // Checks one read's result against the file: `n` bytes asked at `at`.
  auto check = [&](const char* what, ssize_t got, std::size_t n, off_t at, unsigned char* into) {
    ++g_reads;
    if (n >= large) ++(into == pinned ? g_large_reads : g_large_plain_reads);
    const std::size_t want = at >= static_cast<off_t>(size) ? 0 : std::min(n, size - at);
    if (got != static_cast<ssize_t>(want) || std::memcmp(into, bytes_data + at, want) != 0) {
      ++wrong;
      std::fprintf(stderr, "%s of %zu at %lld: %zd bytes, want %zu\n", what, n,
                   static_cast<long long>(at), got, want);
    }
  };
  // read() through the whole file in 1 MiB + 17 steps, into pinned memory: the offset moves.
  off_t at = 0;
  for (;;) {
    const std::size_t n = (1u << 20) + 17;
    const ssize_t got = read(fd, pinned, n);
    check("read", got, n, at, pinned);
    if (got <= 0) break;
    at += got;
    if (lseek(fd, 0, SEEK_CUR) != at) {
      ++wrong;
      std::fprintf(stderr, "read left the offset at %lld, want %lld\n",
                   static_cast<long long>(lseek(fd, 0, SEEK_CUR)), static_cast<long long>(at));
    }
  }
  // pread and its forms at random offsets (some past the end) and sizes, pinned or not.
  for (int i = 0; i < 40; ++i) {
    const std::size_t n = 1 + rng() % room;
    const off_t offset = static_cast<off_t>(rng() % (size + 4096));
    unsigned char* into = (i % 3 == 2) ? plain.get() : pinned;
    switch (i % 4) {
      case 0: check("pread", pread(fd, into, n, offset), n, offset, into); break;
      case 1: check("pread64", pread64(fd, into, n, offset), n, offset, into); break;
      case 2: check("__pread_chk", __pread_chk(fd, into, n, offset, room), n, offset, into); break;
      default:
        check("__pread64_chk", __pread64_chk(fd, into, n, offset, room), n, offset, into);
    }
  }
  wrong += past_the_top_wrong(fd, pinned);
  if (lseek(fd, 1000, SEEK_SET) == 1000)
    check("__read_chk", __read_chk(fd, pinned, 2u << 20, room), 2u << 20, 1000, pinned);
  wrong += readvs_wrong(fd, bytes_data, size, pinned, plain.get(), room, rng);
  // A forked child's reads into pinned memory are libc's (it has none of the parent's threads),
  // and right.
  const pid_t child = fork();
  if (child == 0) {
    const std::size_t n = 2u << 20;
    iovec segs[] = {{pinned, n}, {pinned + n, n}};
    const bool ok = pread(fd, pinned, n, 4096) == static_cast<ssize_t>(n) &&
                    std::memcmp(pinned, bytes_data + 4096, n) == 0 &&
                    preadv(fd, segs, 2, 100) == static_cast<ssize_t>(2 * n) &&
                    std::memcmp(pinned, bytes_data + 100, 2 * n) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    ++wrong;
    std::fprintf(stderr, "the forked child's reads failed\n");
  }
  // errno as libc leaves it after a read that succeeds: untouched, whether cmt takes the read
  // (into pinned memory) or leaves it to libc after asking the page cache (into ordinary memory,
  // the file's pages dropped: the probe's EAGAIN must not show).
  {
    const std::size_t n = 1u << 20;
    errno = ENOTRECOVERABLE;
    check("pread keeping errno", pread(fd, pinned, n, 0), n, 0, pinned);
    const int after_taken = errno;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    errno = ENOTRECOVERABLE;
    check("pread of a dropped file keeping errno", pread(fd, plain.get(), n, 4096), n, 4096,
          plain.get());
    if (after_taken != ENOTRECOVERABLE || errno != ENOTRECOVERABLE) {
      ++wrong;
      std::fprintf(stderr, "a read that succeeded changed errno: %d, then %d\n", after_taken,
                   errno);
    }
  }
  close(fd);
  wrong += freads_wrong(name_for_freads(bytes_data, size), pinned, room, rng);
  // A pipe is never taken, whatever the size: what it holds is read.
  int p[2];
  if (pipe(p) != 0 || write(p[1], bytes_data, 4096) != 4096) return wrong + 1;
  close(p[1]);
  if (read(p[0], pinned, large * 2) != 4096 || std::memcmp(pinned, bytes_data, 4096) != 0) ++wrong;
  close(p[0]);
  // A procfs file says it holds nothing: libc reads it, whatever the size (not counted as large).
  const int maps = open("/proc/self/maps", O_RDONLY);
  if (maps < 0 || read(maps, pinned, large * 2) <= 0) ++wrong;
  if (maps >= 0) close(maps);
  return wrong + shared_reads_wrong(pinned, room);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s THREADS CALLS SEED THRESHOLD\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  const long calls = std::atol(argv[2]);
  const unsigned seed = static_cast<unsigned>(std::atoi(argv[3]));
  // The timer's signal is for thread 0 alone (it unblocks it): every thread made from here on,
  // the fake driver's and cmt's included, inherits the block, so one handler runs at a time.
  sigset_t alarm;
  sigemptyset(&alarm);
  sigaddset(&alarm, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &alarm, nullptr);
  g_threshold = std::strtoull(argv[4], nullptr, 10);
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  g_libc_memmove = libc ? reinterpret_cast<CopyFn>(dlsym(libc, "memmove")) : nullptr;
  g_libc_fread = libc ? reinterpret_cast<FreadFn>(dlsym(libc, "fread")) : nullptr;
  g_libc_memset = libc ? reinterpret_cast<FillFn>(dlsym(libc, "memset")) : nullptr;
  if (!g_libc_memmove || !g_libc_memset || !g_libc_fread) return 2;
  // A context, which real CUDA's cuMemAllocHost needs (the fake's does not).
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS) return 77;  // no GPU
  if (cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS)
    return 2;
  if (long wrong = small_sizes_wrong() + small_fills_wrong()) {
    std::fprintf(stderr, "%ld small-size cases differ\n", wrong);
    return 1;
  }

  std::vector<Buffers> buffers(static_cast<std::size_t>(threads));
  std::mt19937_64 init(seed);
  for (Buffers& b : buffers) {
    void* pinned = nullptr;
    if (cuMemAllocHost(&pinned, kBuffer) != CUDA_SUCCESS) return 2;
    b.real[0] = static_cast<unsigned char*>(std::malloc(kBuffer));
    b.real[1] = static_cast<unsigned char*>(std::malloc(kBuffer));
    b.real[2] = static_cast<unsigned char*>(pinned);
    for (auto*& m : b.mirror) m = static_cast<unsigned char*>(std::malloc(kBuffer));
    for (int i = 0; i < 3; ++i) {
      fill(b.real[i], kBuffer, init);
      g_libc_memmove(b.mirror[i], b.real[i], kBuffer);
    }
  }
  // With CUDA in use (cmt armed by now), fills of new memory.
  if (long wrong = fresh_fills_wrong(4)) {
    std::fprintf(stderr, "%ld fresh fills differ\n", wrong);
    return 1;
  }
  void* signal_area = nullptr;
  if (cuMemAllocHost(&signal_area, 2 * kSignalCopy) != CUDA_SUCCESS) return 2;
  g_signal_dst = static_cast<unsigned char*>(signal_area);
  g_signal_src = g_signal_dst + kSignalCopy;
  fill(g_signal_src, kSignalCopy, init);

  // A child forked now copies with libc (it has none of the parent's threads) and must finish.
  pid_t child = fork();
  if (child == 0) {
    Buffers& b = buffers[0];
    std::memcpy(b.real[2], b.real[0], kMaxCopy);
    _exit(std::memcmp(b.real[2], b.real[0], kMaxCopy) == 0 ? 0 : 1);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "the forked child's copy failed\n");
    return 1;
  }
  g_libc_memmove(buffers[0].mirror[2], buffers[0].real[2], kBuffer);

  struct sigaction sa {};
  sa.sa_handler = on_timer;
  sigaction(SIGALRM, &sa, nullptr);
  itimerval every{{0, 2000}, {0, 2000}};
  setitimer(ITIMER_REAL, &every, nullptr);

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      // The timer's signal goes to thread 0 alone, interrupting its copies: one handler at a time.
      if (t == 0) pthread_sigmask(SIG_UNBLOCK, &alarm, nullptr);
      std::mt19937_64 rng(seed * 1000003u + static_cast<unsigned>(t));
      for (long i = 0; i < calls; ++i) one_call(buffers[static_cast<std::size_t>(t)], rng, t);
    });
  for (auto& t : pool) t.join();
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  // The copy threads idle now: every large read into pinned memory can be taken.
  std::mt19937_64 read_rng(seed + 7);
  long read_wrong = reads_wrong(buffers[0].real[2], kBuffer, read_rng);
  read_wrong += fread_into_guard_wrong();
  if (std::getenv("HOST_COPY_PAST_READ_LIMIT")) read_wrong += past_the_read_limit_wrong();

  std::printf(
      "calls %ld large %ld large_pinned %ld wrong %ld signal_copies %ld signal_wrong %ld fills %ld "
      "large_fills %ld fresh_fills %ld reads %ld large_reads %ld large_plain_reads %ld "
      "large_freads %ld shared_reads %ld read_wrong %ld\n",
      g_calls.load(), g_large.load(), g_large_pinned.load(), g_wrong.load(), g_signal_copies.load(),
      g_signal_wrong.load(), g_fills.load(), g_large_fills.load(), g_fresh_fills.load(), g_reads,
      g_large_reads, g_large_plain_reads, g_freads_large, g_shared_reads.load(), read_wrong);
  return g_wrong.load() == 0 && g_signal_wrong.load() == 0 && read_wrong == 0 ? 0 : 1;
}
