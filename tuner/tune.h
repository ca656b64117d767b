// cmt's tuner: measures copies on one GPU and picks the engine's knobs (threads, chunk bytes,
// staging slots, copy methods, threshold) for a mix of copy sizes.
//
//   instant: under 5 seconds. CPU copy rate against threads on the GPU's local cores and the
//            pinned DMA rate each way set the threads and piece sizes over the built-in defaults
//            (instant_model); copies up to 64 MiB only.
//   full:    coordinate descent over measured configurations, from the better of the instant
//            estimate and the built-in defaults; each knob in turn takes the candidate that gives
//            the mix the most GB/s, if it wins again when measured a second time. Interruptible:
//            the best so far is kept.
// Either way the choice is then measured against the built-in defaults, alternately, and kept
// only if it beats them, so that a profile does not make cmt slower than having none.
//   grid:    every configuration of a small space, measured: the yardstick for `full`.
//
// Everything is measured through the same CopyEngine that libcmt.so runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/options.h"
#include "cuda_session.h"
#include "engine/device/copy_engine.h"
#include "engine/shared/gpu_locality.h"
#include "interposer/classify.h"
#include "memcpy_scaling.h"
#include "topology.h"

namespace cmt {

struct CopyCase {
  std::size_t bytes = 0;
  Direction direction = Direction::HostToDevice;
  double weight = 1;  // share of the mix's bytes
};
using CopyMix = std::vector<CopyCase>;

// 4 MiB to 1 GiB, both directions, equal shares.
CopyMix default_mix(std::size_t largest);
// The mix a watched run saw: CMT_STATS's "sizes" histogram (taken copies by size and direction).
// Empty, with `*error` set, if the file holds no copies.
CopyMix mix_from_stats(const std::string& stats_json_path, std::size_t largest, std::string* error);
std::string describe_mix(const CopyMix& mix);

struct Rate {
  double median = 0, lo = 0, hi = 0;  // GB/s
};

// Times copies of pageable memory on a CudaSession: CUDA's own path, pinned memory, and the copy
// engine under any configuration (one engine kept per configuration in use).
class CopyBench {
 public:
  CopyBench(CudaSession& session, std::size_t largest);
  ~CopyBench();
  // `idle` (untimed) before each copy: to compare with cmt(), which idles so (see there).
  Rate cuda_pageable(const CopyCase& c, int reps,
                     std::chrono::microseconds idle = std::chrono::microseconds(0));
  Rate cuda_pinned(const CopyCase& c, int reps);
  // 0 GB/s if the engine could not complete a copy. Each copy starts after idle_before(config).
  Rate cmt(const Config& config, const CopyCase& c, int reps) {
    return cmt(config, c, reps, idle_before(config));
  }
  Rate cmt(const Config& config, const CopyCase& c, int reps, std::chrono::microseconds idle);
  // How long cmt() idles before each copy: long enough for the engine's threads to sleep.
  static std::chrono::microseconds idle_before(const Config& config) {
    return std::chrono::microseconds(config.spin_us + 1000);
  }
  // An idle time the engine's threads spin through: copies that the warm gate takes.
  static std::chrono::microseconds idle_warm(const Config& config) {
    return std::chrono::microseconds(config.spin_us / 4);
  }
  // `callers` threads at once, half copying host to device and half device to host, each its own
  // `bytes` of the buffers and its own stream (the per-thread default stream), `reps` copies back
  // to back after a common start (and after one untimed round: the engine's start), all bytes
  // over the span from the start to the last end, in GB/s (0 if a copy was not the engine's).
  // The shape where lanes matter.
  double cmt_concurrent(const Config& config, unsigned callers, std::size_t bytes, int reps);
  // This bench's GPU and `others` at once, two callers per GPU (one each way, own streams,
  // `bytes` each), `reps` copies back to back after a common start and an untimed round,
  // through one engine: all bytes over the span to the last end, GB/s (0 if a copy was not the
  // engine's). Each of `others` needs 2 x `bytes` of device memory. The shape where gpu_cores
  // matters.
  double cmt_gpus(const Config& config, const std::vector<CudaSession*>& others, std::size_t bytes,
                  int reps);
  // Frees the engine (its lanes, rings and threads): before sessions that cmt_gpus used close.
  void release_engine() { engine_.reset(); }
  // The mix's effective rate: total bytes over total time, weights as byte shares.
  double cmt_score(const Config& config, const CopyMix& mix, int reps);
  // The size of each of its buffers: the largest copy it can time.
  std::size_t largest() const { return largest_; }
  // False if any copy through the engine gave a wrong byte (each one is checked).
  bool bytes_ok() const { return wrong_ == 0; }

 private:
  CopyEngine& engine_for(const Config& config);
  CudaSession& session_;
  std::size_t largest_;
  char* pageable_ = nullptr;
  char* pageable_out_ = nullptr;
  void* pinned_ = nullptr;  // the same bytes as pageable_
  void* check_ = nullptr;   // where results are read back to be checked
  std::unique_ptr<CopyEngine> engine_;
  Config engine_config_;
  long wrong_ = 0;
};

struct TuneProgress {
  int done = 0, total = 0;
  double best_gbps = 0;
  std::string trying;
};
using ProgressFn = std::function<void(const TuneProgress&)>;

struct TuneResult {
  Config config;                   // the knobs chosen (threads etc. set; others at defaults)
  double score_gbps = 0;           // the mix's rate with them
  int evaluated = 0;               // configurations measured
  bool interrupted = false;        // stopped early: the best so far
  std::vector<std::string> notes;  // what was measured and why the knobs are what they are
};

// How a search rates a configuration: GB/s for the mix (higher is better, 0 if it failed). The
// CLI measures (CopyBench::cmt_score); tests hand in a synthetic landscape.
using ScoreFn = std::function<double(const Config&)>;

TuneResult tune_instant(CopyBench& bench, CudaSession& session, const HostTopology& topology);
// The instant search's model, from its measurements: the link's pinned rate each way (GB/s) and
// the CPU's stage-in and drain rates at each of `counts` threads. The built-in defaults, with
// the piece sizes the link speaks for, and the threads the CPU's rates speak for: the fewest
// that cover the link by 15%, else the fastest, but `default_threads` (what the defaults resolve
// to here) unless that count covers the link clearly less well (by 25%). `why` gets a line
// saying what it chose.
Config instant_model(double link_up, double link_down, unsigned default_threads,
                     const std::vector<unsigned>& counts, const std::vector<ScalingPoint>& stage,
                     const std::vector<ScalingPoint>& drain, std::string* why);
// `stop` is checked before each measurement: once set (Ctrl-C), the best so far is returned,
// marked interrupted.
TuneResult tune_full(const ScoreFn& score, const TuneResult& start, unsigned max_threads,
                     const ProgressFn& progress, const std::atomic<bool>& stop);
TuneResult tune_grid(const ScoreFn& score, const ProgressFn& progress,
                     const std::atomic<bool>& stop);

// The choice and the built-in defaults measured `rounds` times each, alternately. The choice's
// knobs are kept if its median is at least `margin` times the defaults' (a search's best of many
// noisy measurements flatters it), else the defaults' are; a note says which and by how much.
TuneResult confirm_against_builtin(const ScoreFn& score, const TuneResult& chosen, int rounds,
                                   double margin, const std::atomic<bool>& stop);

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
