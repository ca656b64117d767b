// The copies a tune is for: a mix of sizes and directions, each with its share of the bytes. By
// default a spread of sizes; with a command, the copies its watched run made (CMT_STATS).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/copy_types.h"
#include "stats_files.h"

namespace cmt {

struct CopyCase {
  std::size_t bytes = 0;
  Direction direction = Direction::HostToDevice;
  double weight = 1;  // share of the mix's bytes
};
using CopyMix = std::vector<CopyCase>;

// 4 MiB to 1 GiB, both directions, equal shares.
CopyMix default_mix(std::size_t largest);
// The mix a watched run saw: the "sizes" histograms (taken copies by size and direction) of its
// processes' statistics, summed. Empty, with `*error` set, if they hold no copies.
CopyMix mix_from_stats(const StatsSum& sum, std::size_t largest, std::string* error);
std::string describe_mix(const CopyMix& mix);

}  // namespace cmt
