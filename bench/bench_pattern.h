// What the copy benchmarks share about their numbers: known contents that differ by thread, round
// and mode (cheap to write and to check, so every window's bytes can be checked), and medians.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace cmt::bench {

// 8-byte words, each a function of its offset and the seed; a tail under 8 bytes bytewise.
inline std::uint64_t pattern_word(std::size_t i, std::uint64_t seed) {
  return (i * 0x9E3779B97F4A7C15ull) ^ seed;
}

inline void write_pattern(unsigned char* p, std::size_t bytes, std::uint64_t seed) {
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t w = pattern_word(i, seed);
    std::memcpy(p + i, &w, 8);
  }
  for (std::size_t i = bytes & ~std::size_t{7}; i < bytes; ++i)
    p[i] = static_cast<unsigned char>(seed + i);
}

inline bool has_pattern(const unsigned char* p, std::size_t bytes, std::uint64_t seed) {
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w != pattern_word(i, seed)) return false;
  }
  for (std::size_t i = bytes & ~std::size_t{7}; i < bytes; ++i)
    if (p[i] != static_cast<unsigned char>(seed + i)) return false;
  return true;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace cmt::bench
