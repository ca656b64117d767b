#include "pickers.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>

#include "common/engine_rules.h"
#include "engine/host/host_copier.h"
#include "engine/shared/gpu_locality.h"

namespace cmt {
namespace {
constexpr std::size_t kKiB = 1024, kMiB = kKiB * 1024;
}  // namespace

PickedThresholds pick_thresholds(CopyBench& bench, const Config& config,
                                 std::vector<std::string>* notes) {
  const std::size_t sizes[] = {64 * kKiB, 128 * kKiB, 256 * kKiB, 512 * kKiB,
                               1 * kMiB,  2 * kMiB,   4 * kMiB,   8 * kMiB};
  PickedThresholds out;
  // From `below` down, the smallest size at which cmt still wins, both paths idle `idle` before
  // each copy; `below` if it loses at once.
  auto smallest_win = [&](Direction d, std::size_t below, std::chrono::microseconds idle,
                          std::string& line) {
    std::size_t threshold = below;
    for (auto it = std::rbegin(sizes); it != std::rend(sizes); ++it) {
      if (*it >= below) continue;
      const CopyCase c{*it, d, 1};
      // Small copies vary more from one to the next: more of them.
      const int reps = *it < kMiB ? 15 : 5;
      const double ratio = bench.cmt(config, c, reps, idle).median /
                           std::max(1e-9, bench.cuda_pageable(c, reps, idle).median);
      char buf[64];
      std::snprintf(buf, sizeof(buf), " %s %s %.2f;", format_byte_size(*it).c_str(),
                    d == Direction::HostToDevice ? "H2D" : "D2H", ratio);
      line += buf;
      if (ratio < 1.05) break;  // from the largest size down: stop at the first size cmt loses
      threshold = *it;
    }
    return threshold;
  };
  std::string line = "threshold: cmt/CUDA asleep at",
              warm_line = "warm_threshold: cmt/CUDA warm at";
  for (Direction d : {Direction::HostToDevice, Direction::DeviceToHost}) {
    const bool up = d == Direction::HostToDevice;
    // Both after the same idle time: a program that works between its copies leaves CUDA's path
    // as cold as cmt's sleeping threads. If cmt never wins below 16 MiB, it takes from 16 MiB on.
    const std::size_t always = smallest_win(d, 16 * kMiB + 1, CopyBench::idle_before(config), line);
    const std::size_t taken = std::min(always, 16 * kMiB);
    (up ? out.always.h2d : out.always.d2h) = taken;
    (up ? out.warm.h2d : out.warm.d2h) =
        config.spin_us ? smallest_win(d, taken, CopyBench::idle_warm(config), warm_line) : taken;
  }
  if (notes) {
    notes->push_back(line + " -> H2D " + format_byte_size(out.always.h2d) + ", D2H " +
                     format_byte_size(out.always.d2h));
    notes->push_back(warm_line + " -> H2D " + format_byte_size(out.warm.h2d) + ", D2H " +
                     format_byte_size(out.warm.d2h));
  }
  return out;
}

unsigned pick_lanes(const std::vector<std::pair<unsigned, double>>& measured) {
  double auto_rate = 0;
  for (const auto& m : measured)
    if (m.first == rules::kAutoLanes) auto_rate = m.second;
  unsigned best = 0;
  double best_rate = auto_rate * 1.02;
  for (const auto& m : measured)
    if (m.first != rules::kAutoLanes && m.second > best_rate) {
      best = m.first;
      best_rate = m.second;
    }
  return auto_rate > 0 ? best : 0;  // without the rule's own figure, keep the rule
}

unsigned measure_lanes(CopyBench& bench, const Config& config, std::vector<std::string>* notes) {
  constexpr unsigned kCallers = 8;
  const unsigned candidates[] = {1, 2, 4};
  const std::size_t bytes =
      std::min<std::size_t>(64 * kMiB, bench.largest() / kCallers / 4096 * 4096);
  std::vector<std::vector<double>> rates(std::size(candidates));
  for (int round = 0; round < 3; ++round)
    for (std::size_t k = 0; k < std::size(candidates); ++k) {
      Config c = config;
      c.lanes = candidates[(k + round) % std::size(candidates)];  // rotate which goes first
      // `lanes` governs the copies that may open lanes; these must, whatever their size.
      c.lane_split_from = std::min(c.lane_split_from, bytes);
      rates[(k + round) % std::size(candidates)].push_back(
          bench.cmt_concurrent(c, kCallers, bytes, 4));
    }
  std::vector<std::pair<unsigned, double>> measured;
  std::string line =
      "lanes: 8 callers x " + format_byte_size(bytes) + ", half each way, own streams, GB/s at";
  for (std::size_t k = 0; k < std::size(candidates); ++k) {
    std::sort(rates[k].begin(), rates[k].end());
    const double median = rates[k][rates[k].size() / 2];
    measured.emplace_back(candidates[k], median);
    char buf[48];
    std::snprintf(buf, sizeof(buf), " %u lanes %.1f;", candidates[k], median);
    line += buf;
  }
  const unsigned picked = pick_lanes(measured);
  if (notes)
    notes->push_back(line + (picked ? " -> " + std::to_string(picked)
                                    : std::string(" -> the engine's rule (0: 2, 4 on the legacy "
                                                  "stream)")));
  return picked;
}

GpuCores pick_gpu_cores(double all_gbps, double split_gbps) {
  return all_gbps > 0 && split_gbps > 1.02 * all_gbps ? GpuCores::Split : GpuCores::All;
}

GpuCores measure_gpu_cores(CopyBench& bench, const Config& config,
                           const std::vector<CudaSession*>& others,
                           std::vector<std::string>* notes) {
  const std::size_t callers = 2 * (others.size() + 1);
  std::size_t bytes = std::min<std::size_t>(64 * kMiB, bench.largest() / callers / 4096 * 4096);
  for (const CudaSession* g : others)
    bytes = std::min<std::size_t>(bytes, g->device_bytes() / 2 / 4096 * 4096);
  const GpuCores candidates[] = {GpuCores::All, GpuCores::Split};
  std::vector<double> rates[2];
  for (int round = 0; round < 3; ++round)
    for (int k = 0; k < 2; ++k) {
      const int which = (k + round) % 2;  // rotate which goes first
      Config c = config;
      c.gpu_cores = candidates[which];
      rates[which].push_back(bench.cmt_gpus(c, others, bytes, 4));
    }
  bench.release_engine();
  double median[2];
  for (int k = 0; k < 2; ++k) {
    std::sort(rates[k].begin(), rates[k].end());
    median[k] = rates[k][rates[k].size() / 2];
  }
  const GpuCores picked = pick_gpu_cores(median[0], median[1]);
  if (notes) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "gpu_cores: the %zu GPUs on these cores at once, one caller each way per GPU x "
                  "%s x 4, GB/s: all %.1f; split %.1f -> %s",
                  others.size() + 1, format_byte_size(bytes).c_str(), median[0], median[1],
                  choice_name(picked));
    notes->push_back(buf);
  }
  return picked;
}

namespace {

// From the largest of `sizes` down, the smallest size at which `speedup(n)` (the copy threads
// over one thread) is still at least rules::kHostLegWin; `never` if the largest already falls
// short. Each ratio is added to `line`.
std::size_t smallest_winning_size(const std::vector<std::size_t>& sizes, std::size_t never,
                                  const std::function<double(std::size_t)>& speedup,
                                  std::string& line) {
  std::size_t threshold = never;
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    const double ratio = speedup(*it);
    char buf[48];
    std::snprintf(buf, sizeof(buf), " %s %.2f;", format_byte_size(*it).c_str(), ratio);
    line += buf;
    if (ratio < rules::kHostLegWin)
      break;  // from the largest size down: stop where it stops winning
    threshold = *it;
  }
  return threshold;
}

double seconds_of(const std::function<void()>& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::size_t pick_host_copy_threshold(const Config& config, const std::vector<int>& cpus,
                                     std::vector<std::string>* notes) {
  std::size_t threshold = 64 * kMiB;  // if the copier never wins below this, from 64 MiB on
  std::string line = "host_copy_threshold: threads/libc at";
  try {
    Config c = config;
    c.host_copy = HostCopy::All;
    HostCopier copier(c, c.threads ? c.threads : auto_threads(usable_cpus(cpus.size())), cpus);
    const std::vector<std::size_t> sizes = {256 * kKiB, 512 * kKiB, 1 * kMiB, 2 * kMiB,
                                            4 * kMiB,   8 * kMiB,   16 * kMiB};
    std::vector<char> src(sizes.back(), 1), dst(sizes.back(), 2);  // faulted in, as reused ones
    auto best_of = [](std::size_t n, const std::function<void()>& copy) {
      double best = 1e30;
      for (std::size_t r = 0; r < std::max<std::size_t>(5, (64 * kMiB) / n); ++r)
        best = std::min(best, seconds_of(copy));
      return best;
    };
    threshold = smallest_winning_size(
        sizes, threshold,
        [&](std::size_t n) {
          return best_of(n, [&] { std::memcpy(dst.data(), src.data(), n); }) /
                 best_of(n, [&] { copier.copy(dst.data(), src.data(), n); });
        },
        line);
  } catch (...) {
    line += " the copy threads could not start;";
  }
  if (notes) notes->push_back(line + " -> " + format_byte_size(threshold));
  return threshold;
}

std::size_t pick_host_fill_threshold(const Config& config, const std::vector<int>& cpus,
                                     std::vector<std::string>* notes) {
  std::size_t threshold = 256 * kMiB;  // if the copier never wins below this, from 256 MiB on
  std::string line = "host_fill_threshold: threads/libc into new memory at";
  try {
    Config c = config;
    c.host_fill = HostFill::All;
    HostCopier copier(c, c.threads ? c.threads : auto_threads(usable_cpus(cpus.size())), cpus);
    // Best of three, each into a mapping made just before: its pages exist only once filled.
    auto best_of = [](std::size_t n, const std::function<void(void*)>& fill) {
      double best = 1e30;
      for (int r = 0; r < 3; ++r) {
        void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return best;
        best = std::min(best, seconds_of([&] { fill(p); }));
        munmap(p, n);
      }
      return best;
    };
    threshold = smallest_winning_size(
        {2 * kMiB, 4 * kMiB, 8 * kMiB, 16 * kMiB, 32 * kMiB, 64 * kMiB}, threshold,
        [&](std::size_t n) {
          return best_of(n, [&](void* p) { std::memset(p, 0, n); }) /
                 best_of(n, [&](void* p) { copier.fill(p, 0, n); });
        },
        line);
  } catch (...) {
    line += " the copy threads could not start;";
  }
  if (notes) notes->push_back(line + " -> " + format_byte_size(threshold));
  return threshold;
}

}  // namespace cmt
