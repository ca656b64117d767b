#include "tune_plan.h"

#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>

#include "engine/shared/gpu_locality.h"
#include "pickers.h"
#include "preload.h"
#include "topology.h"
#include "trace_file.h"

namespace cmt {
namespace {

std::string utc_now() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// One decimal, as the profile records rates and times.
double tenths(double x) {
  return static_cast<double>(static_cast<long long>(x * 10)) / 10;
}

// The command's own copies: run once under cmt with a low threshold, so that the engine sees
// (and takes) every pageable copy worth tuning for, its statistics read back as the mix.
TuneOutcome watch_copies(const TuneRequest& request, CopyMix* mix,
                         const std::function<void(const std::string&)>& say) {
  TuneOutcome out;
  const PrivateTempDir scratch;
  if (scratch.path().empty()) {
    out.status = 1;
    out.error = std::string("cannot make a temporary directory: ") + std::strerror(errno);
    return out;
  }
  // One file per process of the command's tree (its pid in the name), all summed.
  const std::string stats = scratch.path() + "/stats.%p.json";
  say("watching the copies of: " + request.command[0] + " ...");
  const ChildRun watched =
      run_preloaded(request.command, request.library,
                    {"CMT_STATS=" + stats, "CMT_THRESHOLD=64K", "CMT_D2H_THRESHOLD=64K"});
  if (watched.status != 0) {
    out.status = watched.status < 0 ? 127 : 1;
    out.error = std::string("the command ") +
                (watched.status < 0 ? "could not be started" : "failed") + " (status " +
                std::to_string(watched.status) + "); nothing was tuned";
    return out;
  }
  std::string error;
  StatsSum sum;
  for (const std::string& file : stats_files(stats))
    if (!add_stats_file(file, &sum, &error)) say("left out: " + error);
  *mix = mix_from_stats(sum, request.largest, &error);
  if (mix->empty()) {
    out.status = 1;
    out.error = error + "; nothing to tune for";
    return out;
  }
  say("its copies (share of bytes): " + describe_mix(*mix));
  return out;
}

// The copies of a recorded trace (`cmt run --record`) as the mix.
TuneOutcome mix_of_trace(const std::string& path, std::size_t largest, CopyMix* mix,
                         const std::function<void(const std::string&)>& say) {
  TuneOutcome out;
  Trace trace;
  std::string error;
  if (!read_trace_file(path, &trace, &error)) {
    out.status = 2;
    out.error = error;
    return out;
  }
  *mix = mix_from_stats(sum_of_trace(trace), largest, &error);
  if (mix->empty()) {
    out.status = 1;
    out.error = path + ": " + error + "; nothing to tune for";
    return out;
  }
  say("the trace's copies (share of bytes): " + describe_mix(*mix));
  return out;
}

// The GPU's local cores, by hwloc (all the machine's if it cannot say).
std::vector<int> local_cpus_of(const CudaSession& session, const HostTopology& topology) {
  for (const GpuPlacement& g : topology.gpus)
    if (strcasecmp(g.pci_bus_id.c_str(), session.pci_bus_id().c_str()) == 0) return g.local_cpus;
  return {};
}

// The other GPUs whose local cores (by hwloc) are the same as `session`'s, opened with room for
// measure_gpu_cores' buffers (a GPU that cannot be opened is left out, with a note). The calling
// thread's current context is `session`'s again afterwards.
std::vector<std::unique_ptr<CudaSession>> open_gpus_on_same_cores(const CudaSession& session,
                                                                  const HostTopology& topology,
                                                                  std::vector<std::string>* notes) {
  const std::vector<int> mine = local_cpus_of(session, topology);
  std::vector<std::unique_ptr<CudaSession>> out;
  if (mine.empty()) return out;
  const DriverApi& api = session.driver();
  int count = 0;
  if (api.device_get_count(&count) != CUDA_SUCCESS) return out;
  for (int d = 0; d < count; ++d) {
    CUdevice dev = 0;
    char bus[64] = {};
    if (api.device_get(&dev, d) != CUDA_SUCCESS ||
        api.device_get_pci_bus_id(bus, sizeof(bus), dev) != CUDA_SUCCESS ||
        strcasecmp(bus, session.pci_bus_id().c_str()) == 0)
      continue;
    const bool same_cores =
        std::any_of(topology.gpus.begin(), topology.gpus.end(), [&](const auto& g) {
          return strcasecmp(g.pci_bus_id.c_str(), bus) == 0 && g.local_cpus == mine;
        });
    if (!same_cores) continue;
    std::string error;
    if (auto other = CudaSession::open(d, 128u << 20, &error))
      out.push_back(std::move(other));
    else
      notes->push_back("gpu_cores: GPU " + std::to_string(d) + " left out: " + error);
  }
  (void)api.ctx_set_current(session.context());
  return out;
}

// The grid search, the yardstick for the full one: every point of a small space, then the full
// search from the instant estimate, then both winners measured again, alternately, for a fair
// ratio (a note).
TuneResult grid_with_check(const ScoreFn& measured, CopyBench& bench, const CopyMix& mix,
                           const TuneResult& instant, const ProgressFn& progress,
                           const std::atomic<bool>& stop) {
  TuneResult result = tune_grid(measured, progress, stop);
  if (result.interrupted) return result;
  const TuneResult full = tune_full(measured, instant, 15, progress, stop);
  std::vector<double> g, f;
  for (int round = 0; round < 5 && !stop.load(); ++round) {
    g.push_back(bench.cmt_score(result.config, mix, 3));
    f.push_back(bench.cmt_score(full.config, mix, 3));
  }
  if (g.empty()) return result;
  const double gm = rate_of(g).median, fm = rate_of(f).median;
  char buf[96];
  std::snprintf(buf, sizeof(buf),
                " %.1f GB/s vs the grid's best %.1f GB/s, measured again "
                "alternately: full/grid = %.3f",
                fm, gm, fm / std::max(1e-9, gm));
  result.notes.push_back("check: the full search's choice (" + tuned_knobs_text(full.config, true) +
                         ")" + buf);
  return result;
}

// The search the request names, from the instant estimate, then (but for the grid) the choice
// confirmed against the built-in defaults: never slower than no profile. Its notes join `notes`.
TuneResult search_lane_knobs(const TuneRequest& request, CopyBench& bench, const CopyMix& mix,
                             TuneResult instant, unsigned local, const ProgressFn& progress,
                             const std::atomic<bool>& stop, std::vector<std::string>* notes) {
  // Each configuration a search tries: the mix, three timed copies of each case.
  const ScoreFn measured = [&](const Config& c) { return bench.cmt_score(c, mix, 3); };
  TuneResult result = instant;
  if (request.search == "full" || request.search == "grid") {
    result = request.search == "full"
                 ? tune_full(measured, instant, local > 1 ? local - 1 : 1, progress, stop)
                 : grid_with_check(measured, bench, mix, instant, progress, stop);
    notes->insert(notes->end(), result.notes.begin(), result.notes.end());
  } else {
    result.score_gbps = bench.cmt_score(result.config, mix, 3);
  }
  Config builtin_here;  // the built-in defaults, with the threads they resolve to on this GPU
  builtin_here.threads = auto_threads(local);
  if (request.search == "instant" && same_lane_knobs(result.config, builtin_here)) {
    notes->push_back("confirm: not needed, the model's choice is the built-in defaults");
  } else if (request.search != "grid") {
    // The choice must beat the built-in defaults by 2%, measured alternately (5 rounds after a
    // full search, 3 after the estimate, which has seconds).
    const std::size_t had = result.notes.size();
    result =
        confirm_against_builtin(measured, result, request.search == "full" ? 5 : 3, 1.02, stop);
    notes->insert(notes->end(), result.notes.begin() + static_cast<long>(had), result.notes.end());
  }
  // The defaults' "0 threads" spelled out as the engine resolves it here, so that the profile
  // says what runs.
  if (!result.config.threads) result.config.threads = auto_threads(local);
  return result;
}

// The knobs the search does not move, each by a measurement of its own: the thresholds; with a
// full search the lanes (they matter only when copies overlap) and gpu_cores (where other GPUs
// share this one's cores); and the host leg's thresholds.
void pick_other_knobs(const TuneRequest& request, CopyBench& bench, const CudaSession& session,
                      const HostTopology& topology, bool interrupted, Config* config,
                      std::vector<std::string>* notes) {
  const PickedThresholds thresholds = pick_thresholds(bench, *config, notes);
  config->threshold = thresholds.always.h2d;
  config->d2h_threshold = thresholds.always.d2h;
  config->warm_threshold = thresholds.warm.h2d;
  config->d2h_warm_threshold = thresholds.warm.d2h;
  if (request.search != "instant" && !interrupted) {
    config->lanes = measure_lanes(bench, *config, notes);
    const auto others = open_gpus_on_same_cores(session, topology, notes);
    std::vector<CudaSession*> others_raw;
    for (const auto& g : others) others_raw.push_back(g.get());
    if (!others_raw.empty())
      config->gpu_cores = measure_gpu_cores(bench, *config, others_raw, notes);
  }
  const std::vector<int> cpus = local_cpus_of(session, topology);
  config->host_copy_threshold = pick_host_copy_threshold(*config, cpus, notes);
  config->host_fill_threshold = pick_host_fill_threshold(*config, cpus, notes);
}

// What the choice gives: CUDA's path, cmt's built-in defaults, the tuned knobs and pinned memory,
// at 4 MiB, 64 MiB and 1 GiB each way (those the bench's buffers hold).
std::vector<MeasuredRow> measure_rows(CopyBench& bench, const Config& tuned) {
  std::vector<MeasuredRow> rows;
  const Config builtin;
  for (std::size_t bytes : {std::size_t{4} << 20, std::size_t{64} << 20, std::size_t{1} << 30}) {
    if (bytes > bench.largest()) continue;
    for (Direction d : {Direction::HostToDevice, Direction::DeviceToHost}) {
      const CopyCase c{bytes, d, 1};
      rows.push_back({bytes, d, bench.cuda_pageable(c, 5).median, bench.cmt(builtin, c, 5).median,
                      bench.cmt(tuned, c, 5).median, bench.cuda_pinned(c, 5).median});
    }
  }
  return rows;
}

}  // namespace

TuneOutcome run_tune(const TuneRequest& request, const ProgressFn& progress,
                     const std::atomic<bool>& stop,
                     const std::function<void(const std::string&)>& say) {
  const auto start = std::chrono::steady_clock::now();
  // The instant search measures copies up to 64 MiB: its promise is seconds.
  const std::size_t largest = request.search == "instant"
                                  ? std::min<std::size_t>(request.largest, 64u << 20)
                                  : request.largest;
  CopyMix mix = default_mix(largest);
  if (!request.trace.empty()) {
    TuneOutcome read = mix_of_trace(request.trace, largest, &mix, say);
    if (read.status != 0) return read;
  } else if (!request.command.empty()) {
    TuneRequest watch = request;
    watch.largest = largest;
    TuneOutcome watched = watch_copies(watch, &mix, say);
    if (watched.status != 0) return watched;
  }
  std::size_t need = 64u << 20;
  for (const CopyCase& c : mix) need = std::max(need, c.bytes);

  TuneOutcome out;
  std::string error;
  auto session = CudaSession::open(request.device, need, &error);
  if (!session) {
    out.status = 1;
    out.error = error;
    return out;
  }
  say("GPU " + std::to_string(request.device) + ": " + session->name() + " (" +
      session->pci_bus_id() + "), search '" + request.search + "'");
  CopyBench bench(*session, need);
  const HostTopology topology = read_topology();
  const std::vector<int> cpus = local_cpus_of(*session, topology);
  const unsigned local = static_cast<unsigned>(
      usable_cpus(cpus.empty() ? static_cast<std::size_t>(std::max(1, topology.processing_units))
                               : cpus.size()));
  const TuneResult instant = tune_instant(bench, *session, topology);
  std::vector<std::string> notes = instant.notes;
  TuneResult result =
      search_lane_knobs(request, bench, mix, instant, local, progress, stop, &notes);
  pick_other_knobs(request, bench, *session, topology, result.interrupted, &result.config, &notes);

  out.config = result.config;
  out.evaluated = std::max(1, result.evaluated);
  out.pci_bus_id = session->pci_bus_id();
  TuneRecord& record = out.record;
  record.search = request.search;
  record.date = utc_now();
  record.seconds =
      tenths(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  record.gpu = session->name() + " (" + session->pci_bus_id() + ")";
  record.mix = describe_mix(mix);
  record.mix_gbps = tenths(result.score_gbps);
  record.interrupted = result.interrupted;
  record.notes = notes;
  record.rows = measure_rows(bench, out.config);
  out.bytes_ok = bench.bytes_ok();
  return out;
}

CommandTimes time_command(const std::vector<std::string>& command, const std::string& library,
                          const std::string& profile) {
  CommandTimes out;
  const ChildRun plain = run_preloaded(command, library, {"CMT_DISABLE=1"});
  const ChildRun tuned = run_preloaded(command, library, {"CMT_PROFILE=" + profile});
  out.without_s = plain.seconds;
  out.with_s = tuned.seconds;
  if (plain.status != 0 || tuned.status != 0) {
    out.status = 1;
    out.error = "the confirming runs failed (status " + std::to_string(plain.status) +
                " without cmt, " + std::to_string(tuned.status) + " with)";
  }
  return out;
}

}  // namespace cmt
