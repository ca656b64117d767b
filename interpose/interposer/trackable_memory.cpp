#include "interposer/trackable_memory.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace cmt {
namespace {

constexpr std::size_t kMmappedBit = 2, kNonMainArenaBit = 4, kFlagBits = 7;
constexpr int kPagesSearched = 64;

std::uintptr_t page_size() {
  static const auto size = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// Reads two words at `at` without touching the memory directly: false where it is not mapped.
bool read_words(std::uintptr_t at, std::size_t out[2]) {
  iovec local{out, 2 * sizeof(std::size_t)};
  iovec remote{reinterpret_cast<void*>(at), 2 * sizeof(std::size_t)};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
         static_cast<ssize_t>(2 * sizeof(std::size_t));
}

// The chunk at `chunk` is a glibc mmap'd chunk holding [lo, hi): its prev_size word is the offset
// of the chunk in its mapping (memalign's lead), and mapping and chunk end on page boundaries.
bool mmapped_chunk_holds(std::uintptr_t chunk, std::uintptr_t lo, std::uintptr_t hi) {
  std::size_t header[2];
  if (!read_words(chunk, header)) return false;
  const std::size_t lead = header[0], size = header[1] & ~kFlagBits;
  if (!(header[1] & kMmappedBit) || (header[1] & kNonMainArenaBit) || lead > chunk) return false;
  const std::uintptr_t page = page_size(), mapping = chunk - lead;
  return mapping % page == 0 && (lead + size) % page == 0 && size >= 4 * sizeof(std::size_t) &&
         lo >= chunk + 2 * sizeof(std::size_t) && hi <= chunk + size && hi > lo;
}

// The heaps of glibc's other arenas (a thread's malloc): 64 MiB-aligned mappings (HEAP_MAX_SIZE on
// 64-bit) that start with a heap_info {ar_ptr, prev, size, mprotect_size[, pagesize]}; an arena's
// first heap holds its malloc_state right after that header, and every later heap points there.
constexpr std::uintptr_t kArenaHeapMax = std::uintptr_t{64} << 20;

bool read_heap_info(std::uintptr_t at, std::size_t out[4]) {
  iovec local{out, 4 * sizeof(std::size_t)};
  iovec remote{reinterpret_cast<void*>(at), 4 * sizeof(std::size_t)};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
         static_cast<ssize_t>(4 * sizeof(std::size_t));
}

}  // namespace

bool inside_arena_heap(const void* p, std::size_t bytes) {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  if (bytes == 0 || bytes > UINTPTR_MAX - lo) return false;
  const std::uintptr_t heap = lo & ~(kArenaHeapMax - 1), page = page_size();
  std::size_t info[4];  // ar_ptr, prev, size, mprotect_size
  if (!read_heap_info(heap, info)) return false;
  const std::uintptr_t arena_offset = info[0] & (kArenaHeapMax - 1);
  const std::size_t size = info[2], mprotect_size = info[3];
  return info[0] != 0 && (arena_offset == 32 || arena_offset == 48) && size >= page &&
         size % page == 0 && size <= mprotect_size && mprotect_size <= kArenaHeapMax &&
         lo >= heap + 48 && lo + bytes <= heap + size;
}

HeapSpan main_heap_span() {
  // /proc/self/stat's 47th field is start_brk; the comm field (2nd) may hold spaces, so fields
  // are counted from the last ')'.
  char text[4096];
  const int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return {};
  text[n] = '\0';
  const char* at = std::strrchr(text, ')');
  if (!at) return {};
  ++at;
  for (int field = 3; field <= 47; ++field) {  // `at` is before field `field`
    while (*at == ' ') ++at;
    if (field == 47) {
      const std::uintptr_t start = std::strtoull(at, nullptr, 10);
      const auto end = static_cast<std::uintptr_t>(syscall(SYS_brk, 0));
      if (start == 0 || end < start) return {};
      return {start, end};
    }
    while (*at && *at != ' ') ++at;
    if (!*at) return {};
  }
  return {};
}

bool inside_mmapped_chunk(const void* p, std::size_t bytes) {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  if (bytes == 0 || lo < 2 * sizeof(std::size_t) || bytes > UINTPTR_MAX - lo) return false;
  const std::uintptr_t hi = lo + bytes, page = page_size();
  // The range starts at the chunk's user pointer (a malloc or memalign result)...
  if (mmapped_chunk_holds(lo - 2 * sizeof(std::size_t), lo, hi)) return true;
  // ...or inside a chunk that starts its mapping (no lead), a few pages before.
  std::uintptr_t mapping = lo / page * page;
  for (int i = 0; i < kPagesSearched && mapping > 0; ++i, mapping -= page) {
    std::size_t header[2];
    if (!read_words(mapping, header)) return false;
    if (header[0] == 0 && mmapped_chunk_holds(mapping, lo, hi)) return true;
  }
  return false;
}

TrackableRange trackable_range(const void* p, std::size_t bytes, bool glibc_malloc) {
  TrackableRange out;
  if (!glibc_malloc) {
    out.why = "the malloc below is not glibc's";
    return out;
  }
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  if (bytes == 0 || bytes > UINTPTR_MAX - lo - page_size()) {
    out.why = "an empty or impossible range";
    return out;
  }
  const HeapSpan heap = main_heap_span();
  const bool in_heap = heap.hi > heap.lo && lo >= heap.lo && lo + bytes <= heap.hi;
  if (!in_heap && !inside_arena_heap(p, bytes) && !inside_mmapped_chunk(p, bytes)) {
    out.why = "not in glibc's heaps nor in one of its mmap'd chunks";
    return out;
  }
  const std::uintptr_t page = page_size();
  out.ok = true;
  out.lo = lo / page * page;
  out.hi = (lo + bytes + page - 1) / page * page;
  return out;
}

}  // namespace cmt
