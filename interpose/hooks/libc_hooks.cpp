// Hooks of the C library's copies: memcpy, memmove and their fortified forms (the CMT_LIBC_HOOKS
// rows of hook_table.h). The hot path is one comparison: a call below host_copy_threshold() (every
// call until a copier is armed) jumps straight to libc's own function. Larger ones are offered to
// the host copier (engine/host_copier.h), which declines whatever it should not take.
//
// libc's functions are found once, in a constructor, with dlvsym (which cmt does not hook). A call
// made before that, by a library initialised earlier, is copied by a plain byte loop here.
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>

#include "engine/host_copier.h"
#include "interposer/interposer.h"

namespace cmt::hooks {
namespace {

using CopyFn = void* (*)(void*, const void*, std::size_t) noexcept;
using CheckedCopyFn = void* (*)(void*, const void*, std::size_t, std::size_t) noexcept;

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

CopyFn g_memcpy = early_move;
CopyFn g_memmove = early_move;
CheckedCopyFn g_memcpy_chk = early_checked_move;
CheckedCopyFn g_memmove_chk = early_checked_move;

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
#else
  find(&g_memcpy, "memcpy", "GLIBC_2.17");
  find(&g_memmove, "memmove", "GLIBC_2.17");
  find(&g_memcpy_chk, "__memcpy_chk", "GLIBC_2.17");
  find(&g_memmove_chk, "__memmove_chk", "GLIBC_2.17");
#endif
}

// The slow paths, out of line so that the hooks' fast path is a compare and a jump.
// A thread that opted out (cmt_forward_this_thread) gets libc's copies too.
__attribute__((noinline)) void* large_memcpy(void* dst, const void* src, std::size_t n) noexcept {
  HostCopier* copier = HostCopier::armed();
  if (copier && !ThreadOptOut::active() && copier->take(dst, src, n, false)) return dst;
  return g_memcpy(dst, src, n);
}

__attribute__((noinline)) void* large_memmove(void* dst, const void* src, std::size_t n) noexcept {
  HostCopier* copier = HostCopier::armed();
  if (copier && !ThreadOptOut::active() && copier->take(dst, src, n, true)) return dst;
  return g_memmove(dst, src, n);
}

}  // namespace
}  // namespace cmt::hooks

#define CMT_LIBC_EXPORT extern "C" __attribute__((visibility("default")))

CMT_LIBC_EXPORT void* memcpy(void* dst, const void* src, std::size_t n) noexcept {
  using namespace cmt::hooks;
  if (__builtin_expect(n < cmt::host_copy_threshold(), 1)) return g_memcpy(dst, src, n);
  return large_memcpy(dst, src, n);
}

CMT_LIBC_EXPORT void* memmove(void* dst, const void* src, std::size_t n) noexcept {
  using namespace cmt::hooks;
  if (__builtin_expect(n < cmt::host_copy_threshold(), 1)) return g_memmove(dst, src, n);
  return large_memmove(dst, src, n);
}

// Fortified forms: a copy past the destination's known size goes to libc, which reports it.
CMT_LIBC_EXPORT void* __memcpy_chk(void* dst, const void* src, std::size_t n,
                                   std::size_t room) noexcept {
  using namespace cmt::hooks;
  if (__builtin_expect(n < cmt::host_copy_threshold(), 1) || n > room)
    return g_memcpy_chk(dst, src, n, room);
  return large_memcpy(dst, src, n);
}

CMT_LIBC_EXPORT void* __memmove_chk(void* dst, const void* src, std::size_t n,
                                    std::size_t room) noexcept {
  using namespace cmt::hooks;
  if (__builtin_expect(n < cmt::host_copy_threshold(), 1) || n > room)
    return g_memmove_chk(dst, src, n, room);
  return large_memmove(dst, src, n);
}
