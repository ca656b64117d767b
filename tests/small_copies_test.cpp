// The small copies and fills libcmt-host.so's hooks make themselves (hooks/small_copies.h), called
// directly, each instruction set's variant this processor runs: every size up to kSmallMost at
// every alignment of source and destination within a cache line, every overlap, against a byte
// loop; larger sizes are refused untouched. (host_copy.sh checks the hooks themselves, preloaded,
// against libc at every size to 4096.)
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/cpu_features.h"
#include "hooks/small_copies.h"

namespace cmt {
namespace {

#if defined(__x86_64__)

using MoveFn = std::function<bool(void*, const void*, std::size_t)>;
using FillFn = std::function<bool(void*, int, std::size_t)>;

struct Variant {
  std::string name;
  MoveFn move;
  FillFn fill;
};

std::vector<Variant> variants() {
  std::vector<Variant> out = {{"sse2", small::move_sse2, small::fill_sse2}};
  if (cpu_runs_avx2()) out.push_back({"avx2", small::move_avx2, small::fill_avx2});
  return out;
}

// memmove's meaning, a byte at a time.
void reference_move(unsigned char* d, const unsigned char* s, std::size_t n) {
  if (d < s)
    for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
  else
    for (std::size_t i = n; i-- > 0;) d[i] = s[i];
}

TEST(SmallCopies, EverySizeAndAlignmentApartAndOverlapping) {
  constexpr std::size_t kArea = 1024;
  for (const Variant& v : variants()) {
    std::mt19937_64 rng(9);
    std::vector<unsigned char> real(kArea), want(kArea);
    long wrong = 0;
    for (std::size_t n = 0; n <= small::kSmallMost; ++n)
      for (std::size_t so = 0; so < 64; ++so) {
        for (auto& b : real) b = static_cast<unsigned char>(rng());
        want = real;
        // Apart, at every destination alignment.
        for (std::size_t dao = 0; dao < 64; ++dao) {
          const std::size_t s = 64 + so, d = 512 + dao;
          ASSERT_TRUE(v.move(real.data() + d, real.data() + s, n)) << v.name << " " << n;
          reference_move(want.data() + d, want.data() + s, n);
        }
        // Overlapping, the destination at every shift across the source.
        const std::size_t s = 256 + so;
        for (long shift = -static_cast<long>(n) - 1; shift <= static_cast<long>(n) + 1; ++shift) {
          const std::size_t d = static_cast<std::size_t>(static_cast<long>(s) + shift);
          v.move(real.data() + d, real.data() + s, n);
          reference_move(want.data() + d, want.data() + s, n);
        }
        if (real != want) {
          ++wrong;
          ADD_FAILURE() << v.name << ": " << n << " bytes from offset " << so << " differ";
          real = want;
        }
      }
    EXPECT_EQ(wrong, 0) << v.name;
    std::vector<unsigned char> untouched(kArea, 7), copy = untouched;
    for (std::size_t n : {small::kSmallMost + 1, std::size_t{4096}, std::size_t{1} << 40})
      EXPECT_FALSE(v.move(copy.data(), copy.data() + 8, n)) << v.name << " " << n;
    EXPECT_EQ(copy, untouched);
  }
}

TEST(SmallCopies, EveryFillSizeAlignmentAndValue) {
  constexpr std::size_t kArea = 512;
  for (const Variant& v : variants()) {
    std::vector<unsigned char> real(kArea, 0xEE), want(kArea, 0xEE);
    for (std::size_t n = 0; n <= small::kSmallMost; ++n)
      for (std::size_t at = 64; at < 128; ++at)
        for (int value : {0, 1, 0x5A, 0xFF, -1, 0x1A5, -200}) {
          ASSERT_TRUE(v.fill(real.data() + at, value, n));
          for (std::size_t i = 0; i < n; ++i) want[at + i] = static_cast<unsigned char>(value);
          ASSERT_EQ(real, want) << v.name << ": fill of " << n << " at " << at << " with " << value;
        }
    std::vector<unsigned char> untouched(kArea, 7), fill = untouched;
    EXPECT_FALSE(v.fill(fill.data(), 0, small::kSmallMost + 1)) << v.name;
    EXPECT_EQ(fill, untouched);
  }
}

#endif  // __x86_64__

}  // namespace
}  // namespace cmt
