// Measures how fast the CPU alone can move bytes between a large user buffer and a small staging
// ring, for a given number of threads: the ceiling the copy engine can reach before the PCIe link
// is involved. Used by the benchmarks and (later) by the instant tuner's model.
#pragma once

#include <cstddef>
#include <vector>

#include "config/options.h"

namespace cmt {

enum class ScalingCase {
  StageIn,            // user buffer -> ring (H2D's CPU half)
  DrainOut,           // ring -> user buffer, already faulted in (D2H's CPU half)
  DrainOutFresh,      // ring -> freshly mapped user buffer: every 4 KiB page faults (tensor.cpu())
  DrainOutFreshHuge,  // the same after MADV_HUGEPAGE on each thread's share: 2 MiB faults
  DrainOutFreshPopulate,  // the same after MADV_POPULATE_WRITE of each thread's share
};

struct ScalingPoint {
  unsigned threads;
  double gbps;
};

// Copies `user_bytes` through a `ring_bytes` ring with each thread count in `threads`, pinned to
// `cpus` (empty: anywhere); returns the aggregate rate of the median of `reps` runs.
std::vector<ScalingPoint> measure_memcpy_scaling(ScalingCase which,
                                                 const std::vector<unsigned>& threads,
                                                 const std::vector<int>& cpus,
                                                 std::size_t user_bytes, std::size_t ring_bytes,
                                                 CopyMethod method, int reps);

}  // namespace cmt
