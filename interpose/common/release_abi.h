// The one interface between libcmt-release.so (hooks of every call that gives pages back or
// replaces them: hooks/release_hooks.cpp) and the registration cache in libcmt-engine.so
// (interposer/register_cache.h). The engine hands the library a table when it builds the cache;
// the library answers with what the hooks can see. Both sides include this header, so the types
// are written once. Until the table arrives, or with one of another version, every hook goes
// straight to libc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cmt {

inline constexpr unsigned kReleaseAbiVersion = 3;
inline constexpr const char* kReleaseLibraryAttachSymbol = "cmt_release_library_attach";

// The engine's side.
struct ReleaseAbi {
  unsigned version;  // kReleaseAbiVersion
  // Pages in [lo, hi) are about to be given back or replaced (munmap, mremap, madvise, mmap over
  // them, brk): every registration on them must go, before the call. Never throws.
  void (*pages_released)(std::uintptr_t lo, std::uintptr_t hi) noexcept;
  // A glibc chunk whose user bytes lie in [lo, hi) is about to be reallocated: every
  // registration of a copied range inside it must go (its pages may be trimmed or unmapped
  // once no live chunk holds them). Never throws.
  void (*chunk_released)(std::uintptr_t lo, std::uintptr_t hi) noexcept;
  // The same for a free() of `chunk`, which the engine may take over: true when it frees the
  // chunk itself, once its registrations are back with the driver (the hook then must not free
  // it); false when the hook frees it now. Never throws.
  bool (*chunk_freed)(void* chunk, std::uintptr_t lo, std::uintptr_t hi) noexcept;
  // Whether a free() of the chunk whose user bytes lie in [lo, hi) would be taken over (it holds
  // registrations, and the engine finishes such frees later): a realloc of it is then made as
  // malloc, copy and that free, so that it does not wait for the GPU either. Never throws.
  bool (*chunk_registered)(std::uintptr_t lo, std::uintptr_t hi) noexcept;
  // Something whose extent the hook cannot tell was released (shmdt): every
  // registration goes. Never throws.
  void (*all_released)() noexcept;
};

// The library's side, returned by its attach.
struct ReleaseLibrary {
  unsigned version;  // kReleaseAbiVersion
  // The malloc below the library is glibc's: its chunk headers tell a free() hook the chunk's
  // extent. Without it, no malloc memory may be registered.
  bool glibc_malloc;
  // Which addresses the hooks must report: a call touching nothing in [lo, hi) (and a free of a
  // chunk smaller than `smallest`) goes to libc after a compare. lo == hi: none. The cache widens
  // the span before it registers and may narrow it after it unregisters.
  void (*watch)(std::uintptr_t lo, std::uintptr_t hi, std::size_t smallest) noexcept;
};

}  // namespace cmt
