#include "engine/shared/cpu_copy.h"

#include "common/cpu_features.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace cmt {

void copy_memcpy(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
}

#if defined(__x86_64__)
namespace {

__attribute__((target("avx2"))) void stream_avx2(char* d, const char* s, std::size_t n) {
  for (; n >= 128; n -= 128, d += 128, s += 128) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  if (n) std::memcpy(d, s, n);
}

void stream_sse2(char* d, const char* s, std::size_t n) {
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  if (n) std::memcpy(d, s, n);
}

bool have_avx2() {
  static const bool yes = cpu_runs_avx2();
  return yes;
}

}  // namespace

void copy_streaming(void* dst, const void* src, std::size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Bring the destination to a 64-byte boundary with an ordinary copy; stream the rest.
  std::size_t head = (64 - (reinterpret_cast<std::uintptr_t>(d) & 63)) & 63;
  if (head > bytes) head = bytes;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  if (have_avx2())
    stream_avx2(d, s, bytes);
  else
    stream_sse2(d, s, bytes);
  _mm_sfence();
}
#else
void copy_streaming(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
}
#endif

}  // namespace cmt
