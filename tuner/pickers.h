// cmt tune's pickers: the knobs a search does not move, each set by a measurement of its own
// after the search: the thresholds each way, the lanes, gpu_cores, and the host leg's thresholds.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/options.h"
#include "copy_bench.h"
#include "cuda_session.h"
#include "interposer/classify.h"

namespace cmt {

// Each direction's thresholds, with `config`'s other knobs. `always`: the smallest copy size from
// which cmt beats CUDA's own path (by 5%) at every size up to 8 MiB, both idle long enough for
// cmt's threads to sleep; at least 64 KiB, at most 16 MiB. `warm`: likewise below that, both idle
// a quarter of spin_us (the warm gate's copies); `always` where cmt does not win below it.
struct PickedThresholds {
  Thresholds always, warm;
};
PickedThresholds pick_thresholds(CopyBench& bench, const Config& config,
                                 std::vector<std::string>* notes);

// Lanes per direction for copies on streams of their own: `measured` holds (lanes, GB/s) for
// concurrent callers (CopyBench::cmt_concurrent). 0 (the engine's own rule: kAutoLanes, and
// kAutoLanesLegacy on the legacy stream) unless another count beats kAutoLanes' rate by 2%.
unsigned pick_lanes(const std::vector<std::pair<unsigned, double>>& measured);
// Measures lanes 1, 2 and 4 with 8 callers x 64 MiB (less if the bench's buffers are smaller),
// three alternating rounds, and picks by pick_lanes; a line for `notes`.
unsigned measure_lanes(CopyBench& bench, const Config& config, std::vector<std::string>* notes);

// gpu_cores for GPUs sharing cores: split only where its rate beats all's by 2% (all, each GPU's
// threads on every shared core, is the engine's default).
GpuCores pick_gpu_cores(double all_gbps, double split_gbps);
// Measures both with this bench's GPU and `others` (the GPUs on the same cores) copying at once
// (CopyBench::cmt_gpus, up to 64 MiB per caller), three alternating rounds, and picks by
// pick_gpu_cores; a line for `notes`. Leaves the bench without an engine, so that `others` may
// close.
GpuCores measure_gpu_cores(CopyBench& bench, const Config& config,
                           const std::vector<CudaSession*>& others,
                           std::vector<std::string>* notes);

// The host leg's threshold: from the largest size down, the smallest at which memcpy on a host
// copier of `config` (threads on `cpus`) beats one thread's libc memcpy by 20%, measured between
// two pageable buffers already faulted in; 64 MiB if it never does. No GPU needed.
std::size_t pick_host_copy_threshold(const Config& config, const std::vector<int>& cpus,
                                     std::vector<std::string>* notes);

// The fills' threshold: likewise for memset into new memory (a fresh mapping each time), the
// copier's fill against libc's memset; 256 MiB if it never wins by 20%. No GPU needed.
std::size_t pick_host_fill_threshold(const Config& config, const std::vector<int>& cpus,
                                     std::vector<std::string>* notes);

}  // namespace cmt
