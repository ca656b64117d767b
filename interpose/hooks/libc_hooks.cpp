// libcmt-host.so: hooks of the C library's copies and fills, memcpy, memmove, memset and their
// fortified forms (hook_table.h's CMT_HOST_LIBRARY_EXPORTS), preloaded beside libcmt.so where
// host copies or fills are on.
// It holds no state: the thresholds and the copy come from libcmt.so's host leg, as one table
// (hooks/host_leg_abi.h) found once with dlsym; without libcmt.so every call goes to libc.
//
// Most calls are tiny (memset's as well as memcpy's), and the hook must cost them next to nothing:
// up to 128 bytes, one compare with a constant and a jump to libc's own function; a call below
// host_copy_threshold() (every call until a copier is armed) jumps there too. Larger ones are
// handed to the host leg (interposer/host_leg.h), which declines whatever it should not take.
//
// libc's functions are found once, in a constructor, with dlvsym (which cmt does not hook). A call
// made before that, by a library initialised earlier, is copied by a plain byte loop here.
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hooks/host_leg_abi.h"

namespace cmt::hooks {
namespace {

using CopyFn = void* (*)(void*, const void*, std::size_t) noexcept;
using CheckedCopyFn = void* (*)(void*, const void*, std::size_t, std::size_t) noexcept;
using FillFn = void* (*)(void*, int, std::size_t) noexcept;
using CheckedFillFn = void* (*)(void*, int, std::size_t, std::size_t) noexcept;

// Copies forwards or backwards by bytes (memmove's meaning), for the moment before libc's
// functions are known. `rep movsb` cannot be turned into a call to memcpy by the compiler.
void* early_move(void* dst, const void* src, std::size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (d == s || n == 0) return dst;
#if defined(__x86_64__)
  if (d < s || d >= s + n) {
    asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  } else {
    d += n - 1;
    s += n - 1;
    asm volatile("std\n\trep movsb\n\tcld" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  }
#else
  if (d < s) {
    for (std::size_t i = 0; i < n; ++i) reinterpret_cast<volatile unsigned char*>(d)[i] = s[i];
  } else {
    for (std::size_t i = n; i-- > 0;) reinterpret_cast<volatile unsigned char*>(d)[i] = s[i];
  }
#endif
  return dst;
}

void* early_checked_move(void* dst, const void* src, std::size_t n, std::size_t) noexcept {
  return early_move(dst, src, n);
}

void* early_fill(void* dst, int value, std::size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
#if defined(__x86_64__)
  asm volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(value) : "memory");
#else
  for (std::size_t i = 0; i < n; ++i)
    reinterpret_cast<volatile unsigned char*>(d)[i] = static_cast<unsigned char>(value);
#endif
  return dst;
}

void* early_checked_fill(void* dst, int value, std::size_t n, std::size_t) noexcept {
  return early_fill(dst, value, n);
}

// libcmt.so's host leg (hooks/host_leg_abi.h): until its table is found, no copy is large enough
// to hand over.
const std::atomic<std::size_t> kNever{std::numeric_limits<std::size_t>::max()};
const std::atomic<std::size_t>* g_threshold = &kNever;
const std::atomic<std::size_t>* g_fill_threshold = &kNever;
const cmt::HostLegAbi* g_host_leg = nullptr;
FillFn g_memset = early_fill;
CheckedFillFn g_memset_chk = early_checked_fill;

CopyFn g_memcpy = early_move;
CopyFn g_memmove = early_move;
CheckedCopyFn g_memcpy_chk = early_checked_move;
CheckedCopyFn g_memmove_chk = early_checked_move;

// Calls this short go straight to libc after one compare with a constant, with no load: most calls
// are tiny, and the hook must cost them next to nothing. Copying them here instead (16-byte SSE2
// stores, or 32-byte AVX2 ones behind a CPU flag) cost the 64-byte call 1.2 ns more than libc's
// own on the H200 host (4.4 ns against 3.2); the compare and jump measured 3.41 against 3.44
// without a hook (bench/lab/memcpy_hook_variants.cpp, bench/lab/NOTES.md 31).
constexpr std::size_t kTiny = 128;

template <typename Fn>
void find(Fn* slot, const char* name, const char* version) {
  if (void* fn = dlvsym(RTLD_NEXT, name, version)) *slot = reinterpret_cast<Fn>(fn);
}

// Before other libraries' constructors where the loader allows (priority 101): libcmt.so is
// preloaded, so its constructors run after those of the libraries it needs (libc, libstdc++).
__attribute__((constructor(101))) void find_libc_copies() {
#if defined(__x86_64__)
  find(&g_memcpy, "memcpy", "GLIBC_2.14");
  find(&g_memmove, "memmove", "GLIBC_2.2.5");
  find(&g_memcpy_chk, "__memcpy_chk", "GLIBC_2.3.4");
  find(&g_memmove_chk, "__memmove_chk", "GLIBC_2.3.4");
  find(&g_memset, "memset", "GLIBC_2.2.5");
  find(&g_memset_chk, "__memset_chk", "GLIBC_2.3.4");
#else
  find(&g_memcpy, "memcpy", "GLIBC_2.17");
  find(&g_memmove, "memmove", "GLIBC_2.17");
  find(&g_memcpy_chk, "__memcpy_chk", "GLIBC_2.17");
  find(&g_memmove_chk, "__memmove_chk", "GLIBC_2.17");
  find(&g_memset, "memset", "GLIBC_2.17");
  find(&g_memset_chk, "__memset_chk", "GLIBC_2.17");
#endif
  // libcmt.so is preloaded before this library, so it is loaded (if it is) by now.
  using AbiFn = const cmt::HostLegAbi* (*)() noexcept;
  auto abi = reinterpret_cast<AbiFn>(dlsym(RTLD_DEFAULT, cmt::kHostLegAbiSymbol));
  const cmt::HostLegAbi* table = abi ? abi() : nullptr;
  if (table && table->version == cmt::kHostLegAbiVersion) {
    g_host_leg = table;
    g_threshold = table->copy_threshold;
    g_fill_threshold = table->fill_threshold;
    table->hooks_loaded();
  }
}

// The slow paths, out of line so that the hooks' fast path is a compare and a jump.
__attribute__((noinline)) void* large_memcpy(void* dst, const void* src, std::size_t n) noexcept {
  if (g_host_leg && g_host_leg->copy(dst, src, n)) return dst;
  return g_memcpy(dst, src, n);
}

__attribute__((noinline)) void* large_memmove(void* dst, const void* src, std::size_t n) noexcept {
  if (g_host_leg && g_host_leg->copy(dst, src, n)) return dst;
  return g_memmove(dst, src, n);
}

inline std::size_t host_copy_threshold() {
  return g_threshold->load(std::memory_order_relaxed);
}

__attribute__((noinline)) void* large_memset(void* dst, int value, std::size_t n) noexcept {
  if (g_host_leg && g_host_leg->fill(dst, value, n)) return dst;
  return g_memset(dst, value, n);
}

inline std::size_t host_fill_threshold() {
  return g_fill_threshold->load(std::memory_order_relaxed);
}

}  // namespace
}  // namespace cmt::hooks

#define CMT_LIBC_EXPORT extern "C" __attribute__((visibility("default")))

CMT_LIBC_EXPORT void* memcpy(void* dst, const void* src, std::size_t n) noexcept {
  using namespace cmt::hooks;
  if (__builtin_expect(n <= kTiny || n < host_copy_threshold(), 1)) return g_memcpy(dst, src, n);
  return large_memcpy(dst, src, n);
}

CMT_LIBC_EXPORT void* memmove(void* dst, const void* src, std::size_t n) noexcept {
  using namespace cmt::hooks;
  if (__builtin_expect(n <= kTiny || n < host_copy_threshold(), 1)) return g_memmove(dst, src, n);
  return large_memmove(dst, src, n);
}

// Fortified forms: a copy past the destination's known size goes to libc, which reports it.
CMT_LIBC_EXPORT void* __memcpy_chk(void* dst, const void* src, std::size_t n,
                                   std::size_t room) noexcept {
  using namespace cmt::hooks;
  if (__builtin_expect(n <= kTiny || n < host_copy_threshold(), 1) || n > room)
    return g_memcpy_chk(dst, src, n, room);
  return large_memcpy(dst, src, n);
}

CMT_LIBC_EXPORT void* __memmove_chk(void* dst, const void* src, std::size_t n,
                                    std::size_t room) noexcept {
  using namespace cmt::hooks;
  if (__builtin_expect(n <= kTiny || n < host_copy_threshold(), 1) || n > room)
    return g_memmove_chk(dst, src, n, room);
  return large_memmove(dst, src, n);
}

CMT_LIBC_EXPORT void* memset(void* dst, int value, std::size_t n) noexcept {
  using namespace cmt::hooks;
  if (__builtin_expect(n <= kTiny || n < host_fill_threshold(), 1)) return g_memset(dst, value, n);
  return large_memset(dst, value, n);
}

CMT_LIBC_EXPORT void* __memset_chk(void* dst, int value, std::size_t n,
                                   std::size_t room) noexcept {
  using namespace cmt::hooks;
  if (__builtin_expect(n <= kTiny || n < host_fill_threshold(), 1) || n > room)
    return g_memset_chk(dst, value, n, room);
  return large_memset(dst, value, n);
}
