// The copies and fills of up to kSmallMost bytes that libcmt-host.so's hooks make themselves
// (hooks/libc_hooks.cpp). Jumping on to libc's function costs a second indirect jump on every call,
// which a tight loop of 64-byte memcpy calls measures (bench/lab/NOTES.md 31); copying them here
// costs no more than libc's own small path, as libc copies them: two to eight vector loads and
// stores of overlapping ends, no loop.
//
// Every load comes before any store, so overlapping ranges move exactly as memmove (and glibc's
// x86-64 memcpy) moves them. Header-only, so tests check every size and alignment of the very code
// the hooks inline.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace cmt::small {

inline constexpr std::size_t kSmallMost = 128;

#define CMT_SMALL inline __attribute__((always_inline))

// Up to 15 bytes with general registers: two overlapping moves of the largest width that fits.
CMT_SMALL void move_under_16(unsigned char* d, const unsigned char* s, std::size_t n) {
  if (n >= 8) {
    std::uint64_t a, b;
    __builtin_memcpy(&a, s, 8);
    __builtin_memcpy(&b, s + n - 8, 8);
    __builtin_memcpy(d, &a, 8);
    __builtin_memcpy(d + n - 8, &b, 8);
  } else if (n >= 4) {
    std::uint32_t a, b;
    __builtin_memcpy(&a, s, 4);
    __builtin_memcpy(&b, s + n - 4, 4);
    __builtin_memcpy(d, &a, 4);
    __builtin_memcpy(d + n - 4, &b, 4);
  } else if (n >= 2) {
    std::uint16_t a, b;
    __builtin_memcpy(&a, s, 2);
    __builtin_memcpy(&b, s + n - 2, 2);
    __builtin_memcpy(d, &a, 2);
    __builtin_memcpy(d + n - 2, &b, 2);
  } else if (n == 1) {
    *d = *s;
  }
}

CMT_SMALL void fill_under_16(unsigned char* d, int value, std::size_t n) {
  const std::uint64_t v = 0x0101010101010101ull * static_cast<unsigned char>(value);
  if (n >= 8) {
    __builtin_memcpy(d, &v, 8);
    __builtin_memcpy(d + n - 8, &v, 8);
  } else if (n >= 4) {
    const auto w = static_cast<std::uint32_t>(v);
    __builtin_memcpy(d, &w, 4);
    __builtin_memcpy(d + n - 4, &w, 4);
  } else if (n >= 2) {
    const auto w = static_cast<std::uint16_t>(v);
    __builtin_memcpy(d, &w, 2);
    __builtin_memcpy(d + n - 2, &w, 2);
  } else if (n == 1) {
    *d = static_cast<unsigned char>(v);
  }
}

#if defined(__x86_64__)

CMT_SMALL __m128i load16(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
CMT_SMALL void store16(unsigned char* p, __m128i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
}

// Each kernel moves (fills) n bytes and returns true if n <= kSmallMost, else returns false having
// touched nothing. The size ladder is libc's: one vector's width or less first, out of the way;
// then two vectors, which falls through with no taken branch; then four or eight.

// SSE2, which every x86-64 processor has: 16-byte vectors.
CMT_SMALL bool move_sse2(void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (__builtin_expect(n < 16, 0)) {
    move_under_16(d, s, n);
    return true;
  }
  if (__builtin_expect(n <= 32, 1)) {
    const __m128i a = load16(s), b = load16(s + n - 16);
    store16(d, a);
    store16(d + n - 16, b);
    return true;
  }
  if (n <= 64) {
    const __m128i a = load16(s), b = load16(s + 16), c = load16(s + n - 32), e = load16(s + n - 16);
    store16(d, a);
    store16(d + 16, b);
    store16(d + n - 32, c);
    store16(d + n - 16, e);
    return true;
  }
  if (n > kSmallMost) return false;
  const __m128i a = load16(s), b = load16(s + 16), c = load16(s + 32), e = load16(s + 48);
  const __m128i f = load16(s + n - 64), g = load16(s + n - 48), h = load16(s + n - 32),
                i = load16(s + n - 16);
  store16(d, a);
  store16(d + 16, b);
  store16(d + 32, c);
  store16(d + 48, e);
  store16(d + n - 64, f);
  store16(d + n - 48, g);
  store16(d + n - 32, h);
  store16(d + n - 16, i);
  return true;
}

CMT_SMALL bool fill_sse2(void* dst, int value, std::size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  if (__builtin_expect(n < 16, 0)) {
    fill_under_16(d, value, n);
    return true;
  }
  if (n > kSmallMost) return false;
  const __m128i v = _mm_set1_epi8(static_cast<char>(value));
  store16(d, v);
  store16(d + n - 16, v);
  if (__builtin_expect(n <= 32, 1)) return true;
  store16(d + 16, v);
  store16(d + n - 32, v);
  if (n <= 64) return true;
  store16(d + 32, v);
  store16(d + 48, v);
  store16(d + n - 64, v);
  store16(d + n - 48, v);
  return true;
}

#define CMT_AVX2 __attribute__((target("avx2")))

CMT_AVX2 CMT_SMALL __m256i load32(const unsigned char* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
CMT_AVX2 CMT_SMALL void store32(unsigned char* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}

// AVX2: 32-byte vectors, as glibc's AVX2 and EVEX copies take them.
CMT_AVX2 CMT_SMALL bool move_avx2(void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (__builtin_expect(n < 32, 0)) {
    if (n < 16) {
      move_under_16(d, s, n);
    } else {
      const __m128i a = load16(s), b = load16(s + n - 16);
      store16(d, a);
      store16(d + n - 16, b);
    }
    return true;
  }
  if (__builtin_expect(n <= 64, 1)) {
    const __m256i a = load32(s), b = load32(s + n - 32);
    store32(d, a);
    store32(d + n - 32, b);
    return true;
  }
  if (n > kSmallMost) return false;
  const __m256i a = load32(s), b = load32(s + 32), c = load32(s + n - 64), e = load32(s + n - 32);
  store32(d, a);
  store32(d + 32, b);
  store32(d + n - 64, c);
  store32(d + n - 32, e);
  return true;
}

CMT_AVX2 CMT_SMALL bool fill_avx2(void* dst, int value, std::size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  if (__builtin_expect(n < 32, 0)) {
    if (n < 16) {
      fill_under_16(d, value, n);
    } else {
      const __m128i v = _mm_set1_epi8(static_cast<char>(value));
      store16(d, v);
      store16(d + n - 16, v);
    }
    return true;
  }
  if (n > kSmallMost) return false;
  const __m256i v = _mm256_set1_epi8(static_cast<char>(value));
  store32(d, v);
  store32(d + n - 32, v);
  if (__builtin_expect(n <= 64, 1)) return true;
  store32(d + 32, v);
  store32(d + n - 64, v);
  return true;
}

#endif  // __x86_64__

}  // namespace cmt::small
