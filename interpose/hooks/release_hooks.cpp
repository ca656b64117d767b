// libcmt-release.so: hooks of every call through which a program gives pages back or replaces
// them (free, realloc, reallocarray, munmap, mremap, madvise, mmap and mmap64 over existing pages,
// brk, sbrk, shmdt, and the same system calls made through libc's syscall()),
// preloaded beside libcmt.so only where register = hot. A
// registration of a hot buffer (interposer/register_cache.h) pins the pages its range had when it
// was made: a copy after those pages were replaced would read the old ones, silently. So each
// hook tells the cache what is about to change, and the cache drops every registration on it,
// before the real call.
//
// glibc also gives pages back inside its own functions, where no preloaded hook sees it: free()
// unmaps an mmap'd chunk, realloc() remaps one, and free() and malloc_trim() trim the heap. Those
// pages are always ones that no live chunk holds any more: so a registration of a range inside a
// live chunk is safe until that chunk is freed or reallocated, and the free() and realloc() hooks
// report the chunk by its extent, read from glibc's chunk header. So malloc_trim, which gives
// back only such pages (free chunks' whole pages, the heaps' free tops), is not hooked: its hook
// dropped every registration, each waiting for the GPU's queued work, for nothing (NOTES 67; the
// fake driver's watch sees the system calls made inside it). A free the engine takes over
// (it finishes it once the chunk's registrations are back, without the program waiting for the
// GPU) is not made here, and a realloc of such a chunk is made as malloc, copy and that free. That reading is why the library
// says whether the malloc below it is glibc's: another malloc's memory is never registered.
//
// Nothing is registered until the engine attaches: until then, and whenever nothing is
// registered, every hook goes to libc after one compare (free's cost: bench/lab/NOTES.md 52).
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/release_abi.h"

extern "C" void __libc_free(void*);
extern "C" void* __libc_realloc(void*, std::size_t);

namespace cmt::release {
namespace {

using FreeFn = void (*)(void*);
using ReallocFn = void* (*)(void*, std::size_t);
using ReallocArrayFn = void* (*)(void*, std::size_t, std::size_t);
using MunmapFn = int (*)(void*, std::size_t);
using MremapFn = void* (*)(void*, std::size_t, std::size_t, int, ...);
using MadviseFn = int (*)(void*, std::size_t, int);
using MmapFn = void* (*)(void*, std::size_t, int, int, int, off_t);
using BrkFn = int (*)(void*);
using SbrkFn = void* (*)(intptr_t);
using ShmdtFn = int (*)(const void*);
using SyscallFn = long (*)(long, ...);

// Until the constructor finds the next definitions, glibc's own (free and realloc are called
// before any constructor runs); the rest are found by their first call if it comes earlier.
std::atomic<FreeFn> g_free{&__libc_free};
std::atomic<ReallocFn> g_realloc{&__libc_realloc};
std::atomic<ReallocArrayFn> g_reallocarray{nullptr};
std::atomic<MunmapFn> g_munmap{nullptr};
std::atomic<MremapFn> g_mremap{nullptr};
std::atomic<MadviseFn> g_madvise{nullptr};
std::atomic<MmapFn> g_mmap{nullptr}, g_mmap64{nullptr};
std::atomic<BrkFn> g_brk{nullptr};
std::atomic<SbrkFn> g_sbrk{nullptr};
std::atomic<ShmdtFn> g_shmdt{nullptr};
std::atomic<SyscallFn> g_syscall{nullptr};
bool g_glibc_malloc = false;

// What the cache watches: [g_lo, g_lo + g_span); chunks under g_smallest hold no registered range.
std::atomic<std::uintptr_t> g_lo{0}, g_span{0};
std::atomic<std::size_t> g_smallest{~std::size_t{0}};
std::atomic<const ReleaseAbi*> g_abi{nullptr};

template <typename Fn>
Fn next(std::atomic<Fn>& slot, const char* name) {
  Fn fn = slot.load(std::memory_order_acquire);
  if (!fn) {
    fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    slot.store(fn, std::memory_order_release);
  }
  return fn;
}

__attribute__((constructor(101))) void find_next_functions() noexcept {
  void* next_free = dlsym(RTLD_NEXT, "free");
  void* next_realloc = dlsym(RTLD_NEXT, "realloc");
  // glibc's malloc is the one below when the next free is glibc's own.
  g_glibc_malloc = next_free && next_free == reinterpret_cast<void*>(&__libc_free);
  if (next_free) g_free.store(reinterpret_cast<FreeFn>(next_free));
  if (next_realloc) g_realloc.store(reinterpret_cast<ReallocFn>(next_realloc));
  // syscall() is found here, not at its first call: that may come from anywhere.
  next(g_syscall, "syscall");
}

// Held across a report to the cache. The program's errno: the cache's work (the driver taking
// registrations back) may set it, and a call that then succeeds must leave errno as the program
// had it. And no cancellation: the cache may log or wait in the driver, cancellation points
// inside noexcept frames (free's own among them) that a cancellation's unwinding would end the
// process at; one pending acts at the thread's next cancellation point, as free and munmap are
// none. Only the state changes, as nothing here is one: an asynchronous cancellation that
// arrives meanwhile acts as the state comes back, as it could have inside libc's free.
class Reporting {
 public:
  Reporting() : errno_(errno) { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state_); }
  ~Reporting() {
    pthread_setcancelstate(cancel_state_, nullptr);
    errno = errno_;
  }
  Reporting(const Reporting&) = delete;
  Reporting& operator=(const Reporting&) = delete;

 private:
  int errno_;
  int cancel_state_ = PTHREAD_CANCEL_ENABLE;
};

bool watched(std::uintptr_t lo, std::uintptr_t hi) {
  const std::uintptr_t w = g_lo.load(std::memory_order_relaxed);
  const std::uintptr_t span = g_span.load(std::memory_order_relaxed);
  return span != 0 && lo < w + span && hi > w;
}

void report_pages(const void* p, std::size_t bytes) noexcept {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t hi = bytes > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + bytes;
  if (!watched(lo, hi)) return;
  Reporting reporting;
  if (const ReleaseAbi* abi = g_abi.load(std::memory_order_acquire)) abi->pages_released(lo, hi);
}

// A glibc chunk's user bytes from `p` (malloc_usable_size's answer, from the size word before it,
// whose low three bits are flags): its size less its header, which is the size word alone for a
// chunk in a heap (the next chunk's first word is this one's while it is in use) and both words
// for an mmap'd one (flag 2), whose mapping ends at its size. 0 where the chunk is not one the
// cache can hold registrations in (too small, or not glibc's malloc). Counting the header in
// would reach past the chunk: for an mmap'd chunk, 16 bytes into the next mapping, whose
// registrations the chunk's free would then wait for (bench/lab/NOTES.md 67).
std::size_t chunk_size(void* p) noexcept {
  if (!g_glibc_malloc) return 0;
  const std::size_t word = static_cast<std::size_t*>(p)[-1];
  const std::size_t size = word & ~std::size_t{7};
  const std::size_t header = (word & 2) ? 2 * sizeof(std::size_t) : sizeof(std::size_t);
  if (size <= header) return 0;
  return size - header < g_smallest.load(std::memory_order_relaxed) ? 0 : size - header;
}

// A glibc chunk about to be reallocated. Only reached for chunks reaching into the watched span.
__attribute__((noinline)) void report_chunk(void* p) noexcept {
  const std::size_t size = chunk_size(p);
  if (!size) return;
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  Reporting reporting;
  if (const ReleaseAbi* abi = g_abi.load(std::memory_order_acquire))
    abi->chunk_released(lo, lo + size);
}

// A glibc chunk about to be freed: true when the engine took the free over and makes it itself
// (common/release_abi.h). Only reached for chunks reaching into the watched span.
__attribute__((noinline)) bool report_chunk_free(void* p) noexcept {
  const std::size_t size = chunk_size(p);
  if (!size) return false;
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  Reporting reporting;
  const ReleaseAbi* abi = g_abi.load(std::memory_order_acquire);
  return abi && abi->chunk_freed(p, lo, lo + size);
}

// A realloc of `p` to `bytes`, moved when the engine would take the old chunk's free over: a new
// chunk from malloc, the old one's bytes copied (as many as it can hold and the new one asks for),
// and the old one freed as free() frees it. What realloc returns then (null with errno ENOMEM and
// `p` untouched if malloc fails), in `*out`; false where realloc is to be made as usual. Only
// reached for pointers inside the watched span.
__attribute__((noinline)) bool realloc_moved(void* p, std::size_t bytes, void** out) noexcept {
  const std::size_t size = chunk_size(p);
  if (!size || bytes == 0) return false;  // realloc(p, 0) frees p: free()'s own path
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  {
    Reporting reporting;
    const ReleaseAbi* abi = g_abi.load(std::memory_order_acquire);
    if (!abi || !abi->chunk_registered(lo, lo + size)) return false;
  }
  void* moved = std::malloc(bytes);
  if (moved) {
    std::memcpy(moved, p, std::min(malloc_usable_size(p), bytes));
    Reporting reporting;
    if (!report_chunk_free(p)) g_free.load(std::memory_order_relaxed)(p);
  }
  *out = moved;
  return true;
}

void report_all() noexcept {
  if (g_span.load(std::memory_order_relaxed) == 0) return;
  Reporting reporting;
  if (const ReleaseAbi* abi = g_abi.load(std::memory_order_acquire)) abi->all_released();
}

// What each call about to be made replaces, shared by its libc function's hook and syscall()'s.
// mremap moves or resizes the old range (and with MREMAP_FIXED replaces the target's pages).
void report_mremap(void* old, std::size_t old_bytes, std::size_t new_bytes, int flags,
                   void* target) noexcept {
  if (flags & MREMAP_FIXED) report_pages(target, new_bytes);
  report_pages(old, old_bytes);
}
// Advice that never changes which pages back a range passes; any other may (DONTNEED, FREE and
// REMOVE drop them, and the rest, such as MERGEABLE or HUGEPAGE, let the kernel swap them).
void report_madvise(void* p, std::size_t bytes, int advice) noexcept {
  switch (advice) {
    case MADV_NORMAL:
    case MADV_RANDOM:
    case MADV_SEQUENTIAL:
    case MADV_WILLNEED:
    case MADV_DONTDUMP:
    case MADV_DODUMP:
    case MADV_DOFORK:
    case MADV_NOHUGEPAGE:
      break;
    default:
      report_pages(p, bytes);
  }
}
// A fixed mapping replaces whatever pages were at its address.
void report_mmap(void* p, std::size_t bytes, int flags) noexcept {
  if (flags & MAP_FIXED) report_pages(p, bytes);
}
// Moving the break down gives back the pages between the new break and the old one (the
// kernel's, asked directly: libc's own idea of it may be stale); moving it up gives back none,
// and a break of 0 is refused by the kernel (it only asks where the break is).
void report_brk(void* end) noexcept {
  if (!end || g_span.load(std::memory_order_relaxed) == 0) return;
  const auto now = static_cast<std::uintptr_t>(
      next(g_syscall, "syscall")(SYS_brk, 0L, 0L, 0L, 0L, 0L, 0L));
  const auto to = reinterpret_cast<std::uintptr_t>(end);
  if (to < now) report_pages(end, now - to);
}

// A system call made through syscall() with these arguments: the same reports as its libc
// function's hook. Programs and libraries that bypass the wrappers call it so; a system call
// made by an instruction of the program's own (Go's runtime, a static binary) is not seen, and
// such code does not free glibc's chunks, the only memory cmt registers.
void report_syscall(long number, const long* a) noexcept {
  auto ptr = [](long v) { return reinterpret_cast<void*>(v); };
  auto size = [](long v) { return static_cast<std::size_t>(v); };
  switch (number) {
    case SYS_munmap:
      report_pages(ptr(a[0]), size(a[1]));
      break;
    case SYS_mremap:
      report_mremap(ptr(a[0]), size(a[1]), size(a[2]), static_cast<int>(a[3]), ptr(a[4]));
      break;
    case SYS_madvise:
      report_madvise(ptr(a[0]), size(a[1]), static_cast<int>(a[2]));
      break;
#ifdef SYS_mmap  // (32-bit systems have mmap2 instead, whose offset is in pages)
    case SYS_mmap:
      report_mmap(ptr(a[0]), size(a[1]), static_cast<int>(a[3]));
      break;
#endif
    case SYS_brk:
      report_brk(ptr(a[0]));
      break;
    case SYS_shmdt:
      report_all();
      break;
    default:
      break;
  }
}

void watch(std::uintptr_t lo, std::uintptr_t hi, std::size_t smallest) noexcept {
  g_smallest.store(smallest, std::memory_order_relaxed);
  g_lo.store(lo, std::memory_order_relaxed);
  g_span.store(hi > lo ? hi - lo : 0, std::memory_order_seq_cst);
}

// Whether the glibc chunk whose user bytes start at `p` reaches into the watched span. Its start
// alone is not enough: a range copied deep inside a large chunk (a tensor's storage at an offset,
// a slice of a big buffer) is registered, and watched, far above the chunk's start, and a free
// looked at by its start alone would go unreported, leaving a registration on pages glibc may
// then unmap or trim (seen with the fake driver's watch, bench/lab/NOTES.md 65). Below the span,
// the chunk's size word says how far it reaches: one more load of the header free reads anyway.
bool chunk_in_span(const void* p) {
  const std::uintptr_t lo = g_lo.load(std::memory_order_relaxed);
  const std::uintptr_t span = g_span.load(std::memory_order_relaxed);
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  if (at - lo < span) return true;
  if (at >= lo || span == 0 || !p || !g_glibc_malloc) return false;  // above it, or none
  const std::size_t size = static_cast<const std::size_t*>(p)[-1] & ~std::size_t{7};
  return size > lo - at;
}

}  // namespace
}  // namespace cmt::release

#define CMT_RELEASE_EXPORT extern "C" __attribute__((visibility("default")))

using namespace cmt::release;

CMT_RELEASE_EXPORT const cmt::ReleaseLibrary* cmt_release_library_attach(
    const cmt::ReleaseAbi* abi) noexcept {
  static const cmt::ReleaseLibrary library{cmt::kReleaseAbiVersion, g_glibc_malloc, &watch};
  if (!abi || abi->version != cmt::kReleaseAbiVersion) return nullptr;
  const cmt::ReleaseAbi* none = nullptr;
  if (!g_abi.compare_exchange_strong(none, abi) && none != abi) return nullptr;
  return &library;
}

CMT_RELEASE_EXPORT void free(void* p) {
  if (__builtin_expect(!chunk_in_span(p), 1)) return g_free.load(std::memory_order_relaxed)(p);
  if (report_chunk_free(p)) return;  // the engine frees it once its registrations are back
  g_free.load(std::memory_order_relaxed)(p);
}

CMT_RELEASE_EXPORT void* realloc(void* p, std::size_t bytes) {
  if (p && chunk_in_span(p)) {
    void* moved = nullptr;
    if (realloc_moved(p, bytes, &moved)) return moved;
    report_chunk(p);
  }
  return g_realloc.load(std::memory_order_relaxed)(p, bytes);
}

CMT_RELEASE_EXPORT void* reallocarray(void* p, std::size_t count, std::size_t size) {
  if (p && chunk_in_span(p)) {
    std::size_t bytes;
    void* moved = nullptr;
    if (!__builtin_mul_overflow(count, size, &bytes) && realloc_moved(p, bytes, &moved))
      return moved;
    report_chunk(p);
  }
  return next(g_reallocarray, "reallocarray")(p, count, size);
}

CMT_RELEASE_EXPORT int munmap(void* p, std::size_t bytes) {
  report_pages(p, bytes);
  return next(g_munmap, "munmap")(p, bytes);
}

CMT_RELEASE_EXPORT void* mremap(void* old, std::size_t old_bytes, std::size_t new_bytes, int flags,
                                ...) {
  void* target = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list args;
    va_start(args, flags);
    target = va_arg(args, void*);
    va_end(args);
  }
  report_mremap(old, old_bytes, new_bytes, flags, target);
  return next(g_mremap, "mremap")(old, old_bytes, new_bytes, flags, target);
}

CMT_RELEASE_EXPORT int madvise(void* p, std::size_t bytes, int advice) {
  report_madvise(p, bytes, advice);
  return next(g_madvise, "madvise")(p, bytes, advice);
}

CMT_RELEASE_EXPORT void* mmap(void* p, std::size_t bytes, int prot, int flags, int fd, off_t off) {
  report_mmap(p, bytes, flags);
  return next(g_mmap, "mmap")(p, bytes, prot, flags, fd, off);
}
CMT_RELEASE_EXPORT void* mmap64(void* p, std::size_t bytes, int prot, int flags, int fd,
                                off_t off) {
  report_mmap(p, bytes, flags);
  return next(g_mmap64, "mmap64")(p, bytes, prot, flags, fd, off);
}

CMT_RELEASE_EXPORT int brk(void* end) {
  report_brk(end);
  return next(g_brk, "brk")(end);
}
CMT_RELEASE_EXPORT void* sbrk(intptr_t change) {
  SbrkFn real = next(g_sbrk, "sbrk");
  if (change < 0) {
    auto* end = static_cast<char*>(real(0));
    if (end != reinterpret_cast<char*>(-1)) report_pages(end + change, static_cast<std::size_t>(-change));
  }
  return real(change);
}

// shmdt names only the segment's address, not its size: every registration goes.
CMT_RELEASE_EXPORT int shmdt(const void* p) {
  report_all();
  return next(g_shmdt, "shmdt")(p);
}

// syscall() takes the number and up to six arguments, all passed as longs: reading six is what
// libc's own syscall() does, whatever the caller passed (the unused ones are ignored).
CMT_RELEASE_EXPORT long syscall(long number, ...) {
  long a[6];
  va_list args;
  va_start(args, number);
  for (long& x : a) x = va_arg(args, long);
  va_end(args);
  report_syscall(number, a);
  return next(g_syscall, "syscall")(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
