// cmt tune's searches: each picks the knobs that shape a copy lane (the option table's tuned
// per-GPU knobs) for a mix of copy sizes.
//
//   instant: under 5 seconds. CPU copy rate against threads on the GPU's local cores and the
//            pinned DMA rate each way set the threads and piece sizes over the built-in defaults
//            (instant_model); copies up to 64 MiB only.
//   full:    coordinate descent over measured configurations, from the better of the instant
//            estimate and the built-in defaults; each knob the option table gives search values
//            takes in turn the value that gives the mix the most GB/s, if it wins again when
//            measured a second time. Interruptible: the best so far is kept.
//   grid:    every configuration of a small space, measured: the yardstick for `full`.
// Either way the choice is then measured against the built-in defaults, alternately, and kept
// only if it beats them (confirm_against_builtin), so that a profile does not make cmt slower
// than having none.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "config/options.h"
#include "copy_bench.h"
#include "cuda_session.h"
#include "memcpy_scaling.h"
#include "topology.h"

namespace cmt {

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

}  // namespace cmt
