// libcmt-release.so's hooks, preloaded into this program: it attaches a table of its own in the
// engine's place (common/release_abi.h), watches all memory, and checks that each way of giving
// pages back or replacing them is reported, with the right range, before the call; that advice
// which keeps the pages is not; and that nothing is reported while the watch is empty. Exits 1
// on the first mismatch, 77 if the library is not preloaded.
#include <dlfcn.h>
#include <malloc.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/release_abi.h"

extern "C" void __libc_free(void*);

namespace {

struct Report {
  char what = 0;  // 'p' pages, 'c' chunk, 'a' all
  std::uintptr_t lo = 0, hi = 0;
  bool mapped = false;  // the range's first page was still mapped when reported
};
Report g_last;
int g_reports = 0;

bool still_mapped(std::uintptr_t lo) {
  unsigned char v;
  const long page = sysconf(_SC_PAGESIZE);
  return mincore(reinterpret_cast<void*>(lo / page * page), 1, &v) == 0;
}

void pages(std::uintptr_t lo, std::uintptr_t hi) noexcept {
  g_last = {'p', lo, hi, still_mapped(lo)};
  ++g_reports;
  errno = ENOTRECOVERABLE;  // as the cache's work may leave it: the hook must not pass it on
}
void chunk(std::uintptr_t lo, std::uintptr_t hi) noexcept {
  g_last = {'c', lo, hi, still_mapped(lo)};
  ++g_reports;
}
void all() noexcept {
  g_last = {'a', 0, 0, true};
  ++g_reports;
}
// free(): reported as a chunk; the chunk at g_take_over is taken over (the hook must not free it:
// the test frees it itself, and a second free would be glibc's double-free abort).
void* g_take_over = nullptr;
bool freed(void* p, std::uintptr_t lo, std::uintptr_t hi) noexcept {
  chunk(lo, hi);
  return p == g_take_over;
}
// realloc(): the chunk at g_take_over holds registrations, so its realloc is made as malloc, copy
// and a free taken over.
bool registered(std::uintptr_t lo, std::uintptr_t) noexcept {
  return lo == reinterpret_cast<std::uintptr_t>(g_take_over);
}
const cmt::ReleaseAbi kAbi{cmt::kReleaseAbiVersion, pages, chunk, freed, registered, all};

int g_failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL %s (last report '%c' [%#lx, %#lx) mapped %d, %d reports)\n", what.c_str(),
                g_last.what, static_cast<unsigned long>(g_last.lo),
                static_cast<unsigned long>(g_last.hi), g_last.mapped, g_reports);
    ++g_failures;
  }
}

// The call made by `action` reported `what` covering [lo, hi), while the pages were still there.
template <typename Action>
void expect_report(char what, const void* lo, std::size_t bytes, const std::string& name,
                   Action action) {
  g_last = {};
  const int before = g_reports;
  action();
  const auto a = reinterpret_cast<std::uintptr_t>(lo);
  expect(g_reports > before && g_last.what == what && g_last.mapped &&
             (what == 'a' || (g_last.lo <= a && g_last.hi >= a + bytes)),
         name + " [" + std::to_string(a) + " +" + std::to_string(bytes) + "]");
}

template <typename Action>
void expect_none(const std::string& name, Action action) {
  const int before = g_reports;
  action();
  expect(g_reports == before, name + " (reported, should not be)");
}

}  // namespace

int main() {
  using AttachFn = const cmt::ReleaseLibrary* (*)(const cmt::ReleaseAbi*) noexcept;
  auto attach = reinterpret_cast<AttachFn>(dlsym(RTLD_DEFAULT, cmt::kReleaseLibraryAttachSymbol));
  if (!attach) {
    std::printf("libcmt-release.so is not preloaded\n");
    return 77;
  }
  const cmt::ReleaseLibrary* lib = attach(&kAbi);
  expect(lib && lib->glibc_malloc, "attach: glibc's malloc below");
  if (!lib) return 1;
  const std::size_t big = 64u << 20;  // always an mmap'd chunk
  // Nothing watched: nothing reported.
  lib->watch(0, 0, 64 << 10);
  expect_none("free while nothing is watched", [&] { std::free(std::malloc(big)); });
  lib->watch(1, UINTPTR_MAX, 64 << 10);
  // A chunk's report is its user bytes exactly: past them lie the next chunk's header (in a
  // heap) or the next mapping (after an mmap'd chunk), whose registrations are not the chunk's.
  for (std::size_t bytes : {big, std::size_t{100} << 10}) {
    void* p = std::malloc(bytes);
    const std::size_t usable = malloc_usable_size(p);
    const auto lo = reinterpret_cast<std::uintptr_t>(p);
    expect_report('c', p, bytes, bytes == big ? "free of an mmap'd chunk" : "free of a heap chunk",
                  [&] { std::free(p); });
    expect(g_last.lo == lo && g_last.hi == lo + usable,
           "a chunk's report is [p, p + malloc_usable_size(p)) (" + std::to_string(usable) +
               " bytes)");
  }
  // A free the engine takes over is not glibc's: the chunk is still allocated after it.
  for (std::size_t bytes : {big, std::size_t{100} << 10}) {
    g_take_over = std::malloc(bytes);
    std::memset(g_take_over, 7, bytes);
    expect_report('c', g_take_over, bytes, "free taken over", [&] { std::free(g_take_over); });
    expect(static_cast<unsigned char*>(g_take_over)[bytes - 1] == 7 &&
               malloc_usable_size(g_take_over) >= bytes,
           "a free taken over left the chunk allocated");
    __libc_free(g_take_over);  // the engine's part
    g_take_over = nullptr;
  }
  // A realloc of a chunk the engine would take the free of over: moved to a new chunk holding its
  // bytes, the old one's free taken over (so still allocated), growing or shrinking; reallocarray
  // the same, and its overflow still glibc's ENOMEM.
  for (std::size_t bytes : {big, std::size_t{100} << 10}) {
    for (std::size_t to : {2 * bytes, bytes / 2}) {
      for (bool array : {false, true}) {
        g_take_over = std::malloc(bytes);
        std::memset(g_take_over, 9, bytes);
        void* moved = nullptr;
        const std::string name = std::string(array ? "reallocarray" : "realloc") +
                                 " of a held chunk to " + std::to_string(to);
        expect_report('c', g_take_over, bytes, name, [&] {
          moved = array ? reallocarray(g_take_over, to / 4, 4) : std::realloc(g_take_over, to);
        });
        auto* m = static_cast<unsigned char*>(moved);
        const std::size_t kept = std::min(bytes, to);
        expect(moved && moved != g_take_over && malloc_usable_size(moved) >= to &&
                   m[0] == 9 && m[kept / 2] == 9 && m[kept - 1] == 9,
               name + ": moved, its bytes with it");
        expect(static_cast<unsigned char*>(g_take_over)[bytes - 1] == 9 &&
                   malloc_usable_size(g_take_over) >= bytes,
               name + ": the old chunk's free taken over, so still allocated");
        __libc_free(g_take_over);  // the engine's part
        g_take_over = nullptr;
        std::free(moved);
      }
    }
  }
  {
    g_take_over = std::malloc(big);
    errno = 0;
    volatile std::size_t huge = SIZE_MAX / 2;  // not folded: the compiler would warn of it
    void* none = reallocarray(g_take_over, huge, 4);
    expect(!none && errno == ENOMEM, "reallocarray's overflow: ENOMEM, the chunk kept");
    std::free(g_take_over);  // reported and taken over: the engine's part
    __libc_free(g_take_over);
    g_take_over = nullptr;
  }
  // The span watched starting deep inside a chunk (a range copied at an offset into a big
  // buffer is registered, and watched, from there): the chunk's free and realloc are reported by
  // its extent, though it starts below the span; a chunk below the span that ends before it is
  // not.
  for (std::size_t bytes : {big, std::size_t{400} << 10}) {
    auto* whole = static_cast<unsigned char*>(std::malloc(bytes));
    void* below = std::malloc(100 << 10);
    const auto inside = reinterpret_cast<std::uintptr_t>(whole) + bytes / 2;
    lib->watch(inside, inside + 4096, 64 << 10);
    if (reinterpret_cast<std::uintptr_t>(below) + (100 << 10) < inside)
      expect_none("free of a chunk ending below the span", [&] { std::free(below); });
    else
      std::free(below);
    void* moved = nullptr;
    expect_report('c', whole, bytes, "realloc of a chunk reaching into the span from below",
                  [&] { moved = std::realloc(whole, bytes + 4096); });
    lib->watch(reinterpret_cast<std::uintptr_t>(moved) + bytes / 2,
               reinterpret_cast<std::uintptr_t>(moved) + bytes / 2 + 4096, 64 << 10);
    expect_report('c', moved, bytes, "free of a chunk reaching into the span from below",
                  [&] { std::free(moved); });
  }
  lib->watch(1, UINTPTR_MAX, 64 << 10);
  void* small = std::malloc(1000);
  expect_none("free of a chunk under `smallest`", [&] { std::free(small); });
  void* p = std::malloc(big);
  void* q = nullptr;
  expect_report('c', p, big - 4096, "realloc", [&] { q = std::realloc(p, 2 * big); });
  expect_report('c', q, 2 * big - 4096, "reallocarray", [&] {
    q = reallocarray(q, 3, big);
  });
  std::free(q);
  const std::size_t len = 1 << 20;
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  expect_report('p', m, len, "madvise DONTNEED", [&] { madvise(m, len, MADV_DONTNEED); });
  expect_report('p', m, len, "madvise FREE", [&] { madvise(m, len, MADV_FREE); });
  expect_none("madvise WILLNEED", [&] { madvise(m, len, MADV_WILLNEED); });
  expect_report('p', m, len, "mmap MAP_FIXED over it", [&] {
    mmap(m, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  });
  expect_report('p', m, len, "mremap", [&] { m = mremap(m, len, 2 * len, MREMAP_MAYMOVE); });
  expect_report('p', m, 2 * len, "munmap", [&] { munmap(m, 2 * len); });
  // malloc_trim gives back only pages no live chunk holds, where nothing is registered.
  expect_none("malloc_trim", [&] { malloc_trim(0); });
  const int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
  if (id >= 0) {
    void* s = shmat(id, nullptr, 0);
    expect_report('a', nullptr, 0, "shmdt", [&] { shmdt(s); });
    shmctl(id, IPC_RMID, nullptr);
  }
  void* end = sbrk(0);
  sbrk(1 << 20);
  expect_report('p', static_cast<char*>(end) + (512 << 10), 512 << 10, "sbrk down",
                [&] { sbrk(-(512 << 10)); });
  expect_report('p', end, 512 << 10, "brk down", [&] { brk(end); });
  expect_none("brk up", [&] { brk(static_cast<char*>(end) + (256 << 10)); });
  expect_report('p', end, 256 << 10, "brk down again", [&] { brk(end); });
  // The same system calls through libc's syscall(), as programs that bypass the wrappers make
  // them; a successful call leaves errno as it was.
  m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  errno = 0;
  expect_report('p', m, len, "syscall madvise DONTNEED",
                [&] { syscall(SYS_madvise, m, len, MADV_DONTNEED); });
  expect(errno == 0, "errno after a reported call that succeeded");
  expect_none("syscall madvise WILLNEED", [&] { syscall(SYS_madvise, m, len, MADV_WILLNEED); });
  expect_report('p', m, len, "syscall mmap MAP_FIXED over it", [&] {
    syscall(SYS_mmap, m, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
            -1, 0);
  });
  expect_report('p', m, len, "syscall mremap", [&] {
    m = reinterpret_cast<void*>(syscall(SYS_mremap, m, len, 2 * len, MREMAP_MAYMOVE, nullptr));
  });
  expect_report('p', m, 2 * len, "syscall munmap", [&] { syscall(SYS_munmap, m, 2 * len); });
  if (id >= 0) {
    const int id2 = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
    void* s = shmat(id2, nullptr, 0);
    expect_report('a', nullptr, 0, "syscall shmdt", [&] { syscall(SYS_shmdt, s); });
    shmctl(id2, IPC_RMID, nullptr);
  }
  end = sbrk(0);
  sbrk(1 << 20);
  expect_report('p', end, 512 << 10, "syscall brk down", [&] { syscall(SYS_brk, end); });
  expect_none("syscall brk up", [&] { syscall(SYS_brk, static_cast<char*>(end) + (256 << 10)); });
  expect_report('p', end, 256 << 10, "syscall brk down again", [&] { syscall(SYS_brk, end); });
  expect_none("syscall getpid", [&] { syscall(SYS_getpid); });
  expect_none("syscall brk(0)", [&] { syscall(SYS_brk, nullptr); });
  std::printf("release hooks: %d reports, %d failures\n", g_reports, g_failures);
  return g_failures ? 1 : 0;
}
