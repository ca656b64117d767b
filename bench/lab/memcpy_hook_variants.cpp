// Lab: what a preloaded memcpy hook costs a 64-byte memcpy, by how it copies small calls. Each
// variant is a preload exporting memcpy alone (built with -DVARIANT='B' to 'E'); variant A
// is libcmt-host.so as it was at f057e54 (a CPU flag chose an out-of-line AVX2 copy):
//   B  up to 128 bytes copied inline with 16-byte SSE2 vectors (what libcmt-host.so does now)
//   C  no small path: one compare with the threshold, then a jump to libc's memcpy
//   D  the exported function built for AVX2, 33-128 bytes inline with 32-byte vectors after a
//      flag test, others out of line with SSE2
//   E  up to 128 bytes: one compare with a constant, then a jump to libc's memcpy (no load of
//      the threshold)
// memcpy_hook_variants.sh builds them and times cmt-bench-host small under each, alternating.
// Results: NOTES.md 31.
#include <dlfcn.h>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <immintrin.h>
using CopyFn = void* (*)(void*, const void*, std::size_t) noexcept;
static CopyFn g_memcpy;
static std::atomic<std::size_t> g_thr_v{std::numeric_limits<std::size_t>::max()};
static const std::atomic<std::size_t>* g_thr = &g_thr_v;
static bool g_avx2;
__attribute__((constructor)) static void init() {
  g_memcpy = reinterpret_cast<CopyFn>(dlvsym(RTLD_NEXT, "memcpy", "GLIBC_2.14"));
  __builtin_cpu_init(); g_avx2 = __builtin_cpu_supports("avx2");
}
static inline __attribute__((always_inline)) void* sse(void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<unsigned char*>(dst); auto* s = static_cast<const unsigned char*>(src);
  auto L = [](const unsigned char* p) { return _mm_loadu_si128((const __m128i*)p); };
  auto S = [](unsigned char* p, __m128i v) { _mm_storeu_si128((__m128i*)p, v); };
  if (n >= 16) {
    if (n <= 32) { auto a = L(s), b = L(s + n - 16); S(d, a); S(d + n - 16, b); }
    else if (n <= 64) { auto a = L(s), b = L(s + 16), c = L(s + n - 32), e = L(s + n - 16); S(d, a); S(d + 16, b); S(d + n - 32, c); S(d + n - 16, e); }
    else { auto a = L(s), b = L(s + 16), c = L(s + 32), e = L(s + 48), f = L(s + n - 64), g = L(s + n - 48), h = L(s + n - 32), i = L(s + n - 16);
      S(d, a); S(d + 16, b); S(d + 32, c); S(d + 48, e); S(d + n - 64, f); S(d + n - 48, g); S(d + n - 32, h); S(d + n - 16, i); }
    return dst;
  }
  if (n >= 8) { std::uint64_t a, b; __builtin_memcpy(&a, s, 8); __builtin_memcpy(&b, s + n - 8, 8); __builtin_memcpy(d, &a, 8); __builtin_memcpy(d + n - 8, &b, 8); }
  else if (n >= 4) { std::uint32_t a, b; __builtin_memcpy(&a, s, 4); __builtin_memcpy(&b, s + n - 4, 4); __builtin_memcpy(d, &a, 4); __builtin_memcpy(d + n - 4, &b, 4); }
  else if (n >= 2) { std::uint16_t a, b; __builtin_memcpy(&a, s, 2); __builtin_memcpy(&b, s + n - 2, 2); __builtin_memcpy(d, &a, 2); __builtin_memcpy(d + n - 2, &b, 2); }
  else if (n == 1) *d = *s;
  return dst;
}
__attribute__((noinline)) static void* sse_out(void* d, const void* s, std::size_t n) noexcept { return sse(d, s, n); }
extern "C" __attribute__((visibility("default")))
#if VARIANT == 'D'
__attribute__((target("avx2")))
#endif
void* memcpy(void* dst, const void* src, std::size_t n) noexcept {
#if VARIANT == 'B'
  if (n <= 128) return sse(dst, src, n);
#elif VARIANT == 'E'
  if (__builtin_expect(n <= 128, 1)) return g_memcpy(dst, src, n);
#elif VARIANT == 'D'
  if (n <= 128) {
    if (n < 33 || !g_avx2) return sse_out(dst, src, n);
    auto* d = static_cast<unsigned char*>(dst); auto* s = static_cast<const unsigned char*>(src);
    if (n <= 64) { auto a = _mm256_loadu_si256((const __m256i*)s), b = _mm256_loadu_si256((const __m256i*)(s + n - 32));
      _mm256_storeu_si256((__m256i*)d, a); _mm256_storeu_si256((__m256i*)(d + n - 32), b); }
    else { auto a = _mm256_loadu_si256((const __m256i*)s), b = _mm256_loadu_si256((const __m256i*)(s + 32)),
      c = _mm256_loadu_si256((const __m256i*)(s + n - 64)), e = _mm256_loadu_si256((const __m256i*)(s + n - 32));
      _mm256_storeu_si256((__m256i*)d, a); _mm256_storeu_si256((__m256i*)(d + 32), b);
      _mm256_storeu_si256((__m256i*)(d + n - 64), c); _mm256_storeu_si256((__m256i*)(d + n - 32), e); }
    return dst;
  }
#endif
  if (__builtin_expect(n < g_thr->load(std::memory_order_relaxed), 1)) return g_memcpy(dst, src, n);
  return g_memcpy(dst, src, n);
}
