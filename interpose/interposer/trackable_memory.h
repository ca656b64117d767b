// Which pageable memory cmt may register with CUDA (interposer/register_cache.h): only memory whose
// every release a hook of libcmt-release.so sees before the pages change. The rules, and why:
//
//  - glibc's main heap ([start_brk, brk)): its pages are given back only by brk/sbrk (hooked) or by
//    glibc trimming pages that no live chunk holds (inside free, realloc, malloc_trim). A range
//    the program copies lies in one live chunk, so those pages stay until that chunk is freed or
//    reallocated, which the free() and realloc() hooks report by the chunk's extent.
//  - the heaps of glibc's other arenas (a thread's malloc), by the same argument: glibc shrinks and
//    unmaps them (inside free) only where no live chunk is; recognised by their header.
//  - one of glibc's mmap'd chunks (a large malloc): unmapped only inside free() or remapped inside
//    realloc() of that chunk, both hooked; recognised by its header (IS_MMAPPED, and a mapping
//    that starts and ends on page boundaries around the range).
//  - nothing else: not other mallocs' memory (their headers mean nothing to the free() hook), not
//    file mappings (truncation or hole punching replaces their pages with no call in this process),
//    not thread stacks or a library's data (glibc and the loader unmap those internally).
// Headers are read with process_vm_readv, so a range cmt guessed wrong about cannot fault.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cmt {

struct TrackableRange {
  bool ok = false;
  std::uintptr_t lo = 0, hi = 0;  // the pages to register (ok): the range's, rounded out
  const char* why = "";           // why not (not ok)
};

// Whether [p, p + bytes) may be registered, with `glibc_malloc` saying the malloc below the
// release hooks is glibc's (common/release_abi.h); never faults.
TrackableRange trackable_range(const void* p, std::size_t bytes, bool glibc_malloc);

// The process's heap as glibc's main arena grows it: [start_brk, current break). {0, 0} if
// /proc/self/stat cannot say.
struct HeapSpan {
  std::uintptr_t lo = 0, hi = 0;
};
HeapSpan main_heap_span();

// Whether [p, p + bytes) lies inside the heap of one of glibc's other arenas.
bool inside_arena_heap(const void* p, std::size_t bytes);

// Whether [p, p + bytes) lies inside one of glibc's mmap'd chunks whose header cmt can find (the
// range starts at the chunk's user pointer, or in one of its first 64 pages).
bool inside_mmapped_chunk(const void* p, std::size_t bytes);

}  // namespace cmt
