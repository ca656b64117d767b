#include "copy_mix.h"

#include <algorithm>
#include <cstdio>

#include "common/byte_size.h"

namespace cmt {
namespace {
constexpr std::size_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
}  // namespace

CopyMix default_mix(std::size_t largest) {
  CopyMix mix;
  for (std::size_t bytes : {4 * kMiB, 16 * kMiB, 64 * kMiB, 256 * kMiB, kGiB})
    if (bytes <= largest)
      for (Direction d : {Direction::HostToDevice, Direction::DeviceToHost})
        mix.push_back({bytes, d, 1});
  for (CopyCase& c : mix) c.weight = 1.0 / static_cast<double>(mix.size());
  return mix;
}

CopyMix mix_from_stats(const StatsSum& sum, std::size_t largest, std::string* error) {
  CopyMix mix;
  double total = 0;
  for (int dir = 0; dir < 2; ++dir)
    for (const auto& [low, row] : (dir ? sum.d2h : sum.h2d).sizes) {
      const auto [calls, bytes] = row;
      if (calls && bytes / calls >= 64 * kKiB) {  // tiny copies: CUDA's path, whatever the knobs
        std::size_t typical = std::min<std::size_t>(bytes / calls, largest);
        typical = std::max<std::size_t>(typical / 4096 * 4096, 4096);
        mix.push_back({typical, dir ? Direction::DeviceToHost : Direction::HostToDevice,
                       static_cast<double>(bytes)});
        total += static_cast<double>(bytes);
      }
    }
  if (mix.empty() || total <= 0) {
    *error = "the watched run (" + std::to_string(sum.processes) +
             (sum.processes == 1 ? " process" : " processes") +
             ") made no pageable copy of 64 KiB or more";
    return {};
  }
  // The eight cases that carry the most bytes.
  std::sort(mix.begin(), mix.end(),
            [](const CopyCase& a, const CopyCase& b) { return a.weight > b.weight; });
  if (mix.size() > 8) mix.resize(8);
  double kept = 0;
  for (const CopyCase& c : mix) kept += c.weight;
  for (CopyCase& c : mix) c.weight /= kept;
  return mix;
}

std::string describe_mix(const CopyMix& mix) {
  std::string out;
  for (const CopyCase& c : mix) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s%s %s %.0f%%", out.empty() ? "" : ", ",
                  format_byte_size(c.bytes).c_str(),
                  c.direction == Direction::HostToDevice ? "H2D" : "D2H", c.weight * 100);
    out += buf;
  }
  return out;
}

}  // namespace cmt
