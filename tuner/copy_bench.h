// The tuner's measuring bench: times pageable copies on one GPU three ways (CUDA's own path,
// pinned memory, and the copy engine under any configuration, the same CopyEngine libcmt.so runs),
// alone, from concurrent callers and across GPUs, every byte through the engine checked.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "config/options.h"
#include "copy_mix.h"
#include "cuda_session.h"
#include "engine/device/copy_engine.h"

namespace cmt {

struct Rate {
  double median = 0, lo = 0, hi = 0;  // GB/s
};
// The median and range of some rates.
Rate rate_of(std::vector<double> gbps);

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

}  // namespace cmt
