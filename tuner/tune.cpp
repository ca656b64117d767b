#include "tune.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <thread>

#include "engine/host/host_copier.h"
#include "engine/shared/gpu_locality.h"
#include "memcpy_scaling.h"

namespace cmt {
namespace {

constexpr std::size_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;

char* map_touched(std::size_t bytes, unsigned seed) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* c = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) c[i] = static_cast<unsigned char>(i * 131 + seed);
  return static_cast<char*>(p);
}

Rate summarize(std::vector<double> gbps) {
  if (gbps.empty()) return {};
  std::sort(gbps.begin(), gbps.end());
  return {gbps[gbps.size() / 2], gbps.front(), gbps.back()};
}

// `pause` (untimed) before each copy: see CopyBench::cmt.
template <typename Copy>
Rate time_copies(std::size_t bytes, int reps, Copy&& copy,
                 std::chrono::microseconds pause = std::chrono::microseconds(0)) {
  std::vector<double> gbps;
  for (int i = -1; i < reps; ++i) {  // one warm-up
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
    auto t0 = std::chrono::steady_clock::now();
    if (!copy()) return {};
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 0) gbps.push_back(static_cast<double>(bytes) / s / 1e9);
  }
  return summarize(gbps);
}

std::string knobs_text(const Config& c) {
  return (c.threads ? std::to_string(c.threads) : std::string("auto")) + " threads, " +
         format_byte_size(c.chunk_bytes) + " (D2H " + format_byte_size(c.d2h_chunk_bytes) + ") x " +
         std::to_string(c.slots) + " slots, H2D " + copy_method_name(c.h2d_method) + ", D2H " +
         copy_method_name(c.d2h_method);
}

// "41.9": one decimal, as the notes show rates.
std::string gbps_text(double gbps) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", gbps);
  return buf;
}

// Slots for a ring of about `ring_bytes`, within the option table's range.
unsigned slots_for(std::size_t ring_bytes, std::size_t chunk) {
  return static_cast<unsigned>(std::clamp<std::size_t>(ring_bytes / chunk, 4, 128));
}

}  // namespace

// ---- mixes ---------------------------------------------------------------------------------

CopyMix default_mix(std::size_t largest) {
  CopyMix mix;
  for (std::size_t bytes : {4 * kMiB, 16 * kMiB, 64 * kMiB, 256 * kMiB, kGiB})
    if (bytes <= largest)
      for (Direction d : {Direction::HostToDevice, Direction::DeviceToHost})
        mix.push_back({bytes, d, 1});
  for (CopyCase& c : mix) c.weight = 1.0 / static_cast<double>(mix.size());
  return mix;
}

CopyMix mix_from_stats(const std::string& path, std::size_t largest, std::string* error) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  // libcmt.so's own output, in a fixed shape:
  //   "sizes": {"h2d": [[low, calls, bytes], ...], "d2h": [[...], ...]}
  CopyMix mix;
  double total = 0;
  for (int dir = 0; dir < 2; ++dir) {
    std::size_t at = json.find(dir ? "\"d2h\": [[" : "\"h2d\": [[", json.find("\"sizes\""));
    if (at == std::string::npos) continue;
    const char* p = json.c_str() + json.find("[[", at) + 1;
    unsigned long long low, calls, bytes;
    int used = 0;
    while (std::sscanf(p, " [%llu, %llu, %llu]%n", &low, &calls, &bytes, &used) == 3) {
      p += used;
      if (calls && bytes / calls >= 64 * kKiB) {  // tiny copies: CUDA's path, whatever the knobs
        std::size_t typical = std::min<std::size_t>(bytes / calls, largest);
        typical = std::max<std::size_t>(typical / 4096 * 4096, 4096);
        mix.push_back({typical, dir ? Direction::DeviceToHost : Direction::HostToDevice,
                       static_cast<double>(bytes)});
        total += static_cast<double>(bytes);
      }
      while (*p == ',' || *p == ' ') ++p;
    }
  }
  if (mix.empty() || total <= 0) {
    *error = path + ": the watched run made no pageable copy of 64 KiB or more";
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

// ---- measuring -------------------------------------------------------------------------------

CopyBench::CopyBench(CudaSession& session, std::size_t largest)
    : session_(session), largest_(largest) {
  pageable_ = map_touched(largest, 7);
  pageable_out_ = map_touched(largest, 0);
  pinned_ = session.alloc_pinned(largest);
  check_ = session.alloc_pinned(largest);
  if (pinned_ && pageable_) std::memcpy(pinned_, pageable_, largest);
}

CopyBench::~CopyBench() {
  engine_.reset();
  if (pageable_) munmap(pageable_, largest_);
  if (pageable_out_) munmap(pageable_out_, largest_);
}

Rate CopyBench::cuda_pageable(const CopyCase& c, int reps, std::chrono::microseconds idle) {
  if (!pageable_) return {};
  return time_copies(
      c.bytes, reps,
      [&] {
        return (c.direction == Direction::HostToDevice
                    ? session_.cuda_htod(session_.device_buffer(), pageable_, c.bytes)
                    : session_.cuda_dtoh(pageable_out_, session_.device_buffer(), c.bytes)) ==
                   CUDA_SUCCESS &&
               session_.synchronize() == CUDA_SUCCESS;
      },
      idle);
}

Rate CopyBench::cuda_pinned(const CopyCase& c, int reps) {
  if (!pinned_) return {};
  return time_copies(c.bytes, reps, [&] {
    return (c.direction == Direction::HostToDevice
                ? session_.cuda_htod(session_.device_buffer(), pinned_, c.bytes)
                : session_.cuda_dtoh(pinned_, session_.device_buffer(), c.bytes)) == CUDA_SUCCESS &&
           session_.synchronize() == CUDA_SUCCESS;
  });
}

CopyEngine& CopyBench::engine_for(const Config& config) {
  if (!engine_ || !same_lane_knobs(engine_config_, config) ||
      engine_config_.lanes != config.lanes || engine_config_.gpu_cores != config.gpu_cores) {
    engine_.reset();  // its staging memory and threads go before the next one's arrive
    engine_config_ = config;
    engine_ = std::make_unique<CopyEngine>(session_.driver(), config);
  }
  return *engine_;
}

Rate CopyBench::cmt(const Config& config, const CopyCase& c, int reps,
                    std::chrono::microseconds idle) {
  if (!pageable_ || !pageable_out_ || !pinned_ || !check_) return {};
  CopyEngine& engine = engine_for(config);
  CopyRequest req;
  req.direction = c.direction;
  req.host = c.direction == Direction::HostToDevice ? pageable_ : pageable_out_;
  req.device = session_.device_buffer();
  req.bytes = c.bytes;
  req.stream = CU_STREAM_LEGACY;
  req.synchronous = true;
  const CUdeviceptr dev = session_.device_buffer();
  if (c.direction == Direction::DeviceToHost) {  // known contents to copy back
    if (session_.cuda_htod(dev, pinned_, c.bytes) != CUDA_SUCCESS) return {};
    std::memset(pageable_out_, 0, c.bytes);
  }
  // By default each copy starts with the engine's workers asleep (they spin spin_us after their
  // last job), as in an application that does other work between copies, and as in
  // cmt-bench-copy --gap-us, by which cmt is judged. Timed back to back, every copy but the first
  // would find them still spinning, and a search could favour knobs that only win then.
  Rate r = time_copies(
      c.bytes, reps,
      [&] {
        return engine.copy(req).bytes_done == c.bytes && session_.synchronize() == CUDA_SUCCESS;
      },
      idle);
  // Every byte that went through the engine is checked (H2D: read back through pinned memory).
  if (c.direction == Direction::HostToDevice) {
    if (session_.cuda_dtoh(check_, dev, c.bytes) != CUDA_SUCCESS ||
        std::memcmp(check_, pageable_, c.bytes) != 0)
      ++wrong_;
  } else if (std::memcmp(pageable_out_, pageable_, c.bytes) != 0) {
    ++wrong_;
  }
  return r;
}

namespace {

// One thread's copy in a concurrent measurement: the context it makes current, and its request.
struct Caller {
  CUcontext ctx = nullptr;
  CopyRequest request;
};

// Each caller on its own thread, `reps` copies back to back (each synchronized on its stream)
// after a common start: all bytes over the span from the start to the last end, in GB/s; 0 if
// any copy was not wholly the engine's.
double time_callers_once(CopyEngine& engine, const DriverApi& api,
                         const std::vector<Caller>& callers, int reps) {
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::atomic<int> failed{0};
  std::vector<std::chrono::steady_clock::time_point> ends(callers.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < callers.size(); ++i)
    threads.emplace_back([&, i] {
      const CopyRequest& req = callers[i].request;
      const bool current = api.ctx_set_current(callers[i].ctx) == CUDA_SUCCESS;
      ++ready;
      while (!go.load()) std::this_thread::yield();
      for (int r = 0; r < reps && current; ++r)
        if (engine.copy(req).bytes_done != req.bytes ||
            api.stream_synchronize(req.stream) != CUDA_SUCCESS) {
          ++failed;
          break;
        }
      if (!current) ++failed;
      ends[i] = std::chrono::steady_clock::now();
    });
  while (ready.load() < callers.size()) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go = true;
  for (auto& t : threads) t.join();
  const auto last = *std::max_element(ends.begin(), ends.end());
  const double seconds = std::chrono::duration<double>(last - start).count();
  if (failed.load() || seconds <= 0) return 0;
  double bytes = 0;
  for (const Caller& c : callers) bytes += static_cast<double>(c.request.bytes) * reps;
  return bytes / seconds / 1e9;
}

// The same after one untimed round: a new engine starts its threads and pins its staging rings
// at each lane's first copy, tens of milliseconds that would otherwise weigh on whichever
// configuration was measured first, and on every one where the engine is rebuilt.
double time_callers(CopyEngine& engine, const DriverApi& api, const std::vector<Caller>& callers,
                    int reps) {
  if (time_callers_once(engine, api, callers, 1) <= 0) return 0;
  return time_callers_once(engine, api, callers, reps);
}

CopyRequest caller_request(Direction direction, char* host, CUdeviceptr device, std::size_t bytes) {
  CopyRequest req;
  req.direction = direction;
  req.host = host;
  req.device = device;
  req.bytes = bytes;
  req.stream = CU_STREAM_PER_THREAD;
  req.synchronous = true;
  return req;
}

}  // namespace

double CopyBench::cmt_concurrent(const Config& config, unsigned callers, std::size_t bytes,
                                 int reps) {
  if (!pageable_ || !pageable_out_ || !pinned_ || !check_ || callers < 2 ||
      bytes * callers > largest_ || bytes * callers > session_.device_bytes())
    return 0;
  CopyEngine& engine = engine_for(config);
  const CUdeviceptr dev = session_.device_buffer();
  // Slice i of every buffer is caller i's; the device-to-host callers' slices start with known
  // bytes.
  for (unsigned i = 1; i < callers; i += 2)
    if (session_.cuda_htod(dev + i * bytes, static_cast<char*>(pinned_) + i * bytes, bytes) !=
        CUDA_SUCCESS)
      return 0;
  std::memset(pageable_out_, 0, bytes * callers);
  std::vector<Caller> list;
  for (unsigned i = 0; i < callers; ++i)
    list.push_back({session_.context(),
                    i % 2 == 0 ? caller_request(Direction::HostToDevice, pageable_ + i * bytes,
                                                dev + i * bytes, bytes)
                               : caller_request(Direction::DeviceToHost, pageable_out_ + i * bytes,
                                                dev + i * bytes, bytes)});
  const double gbps = time_callers(engine, session_.driver(), list, reps);
  // Every caller's bytes are checked (host to device: read back through pinned memory), unless a
  // copy was left unfinished (the engine declined it; the hooks would have forwarded the rest).
  for (unsigned i = 0; i < callers && gbps > 0; ++i) {
    const char* want = pageable_ + i * bytes;
    if (i % 2 == 0) {
      if (session_.cuda_dtoh(check_, dev + i * bytes, bytes) != CUDA_SUCCESS ||
          std::memcmp(check_, want, bytes) != 0)
        ++wrong_;
    } else if (std::memcmp(pageable_out_ + i * bytes, want, bytes) != 0) {
      ++wrong_;
    }
  }
  return gbps;
}

double CopyBench::cmt_gpus(const Config& config, const std::vector<CudaSession*>& others,
                           std::size_t bytes, int reps) {
  std::vector<CudaSession*> gpus{&session_};
  gpus.insert(gpus.end(), others.begin(), others.end());
  const std::size_t callers = 2 * gpus.size();
  if (!pageable_ || !pageable_out_ || others.empty() || bytes == 0 || bytes * callers > largest_)
    return 0;
  for (const CudaSession* g : gpus)
    if (!g || 2 * bytes > g->device_bytes()) return 0;
  CopyEngine& engine = engine_for(config);
  const DriverApi& api = session_.driver();
  // GPU g: caller 2g copies host slice 2g to its device buffer's first half, caller 2g + 1 its
  // second half, filled with host slice 2g + 1's bytes first, back into pageable_out_'s slice.
  std::vector<Caller> list;
  bool filled = true;
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    const CUdeviceptr dev = gpus[g]->device_buffer();
    char* up = pageable_ + 2 * g * bytes;
    char* down = pageable_out_ + (2 * g + 1) * bytes;
    filled =
        filled && api.ctx_set_current(gpus[g]->context()) == CUDA_SUCCESS &&
        gpus[g]->cuda_htod(dev + bytes, pageable_ + (2 * g + 1) * bytes, bytes) == CUDA_SUCCESS;
    list.push_back({gpus[g]->context(), caller_request(Direction::HostToDevice, up, dev, bytes)});
    list.push_back(
        {gpus[g]->context(), caller_request(Direction::DeviceToHost, down, dev + bytes, bytes)});
  }
  std::memset(pageable_out_, 0, bytes * callers);
  const double gbps = filled ? time_callers(engine, api, list, reps) : 0;
  // Every byte checked, as in cmt_concurrent: each GPU's first half read back, each copy to the
  // host compared.
  std::vector<char> back(gbps > 0 ? bytes : 0);
  for (std::size_t g = 0; g < gpus.size() && gbps > 0; ++g) {
    if (api.ctx_set_current(gpus[g]->context()) != CUDA_SUCCESS ||
        gpus[g]->cuda_dtoh(back.data(), gpus[g]->device_buffer(), bytes) != CUDA_SUCCESS ||
        std::memcmp(back.data(), pageable_ + 2 * g * bytes, bytes) != 0)
      ++wrong_;
    if (std::memcmp(pageable_out_ + (2 * g + 1) * bytes, pageable_ + (2 * g + 1) * bytes, bytes) !=
        0)
      ++wrong_;
  }
  (void)api.ctx_set_current(session_.context());
  return gbps;
}

double CopyBench::cmt_score(const Config& config, const CopyMix& mix, int reps) {
  double seconds_per_byte = 0;
  for (const CopyCase& c : mix) {
    Rate r = cmt(config, c, reps);
    if (r.median <= 0) return 0;
    seconds_per_byte += c.weight / (r.median * 1e9);
  }
  return seconds_per_byte > 0 ? 1.0 / seconds_per_byte / 1e9 : 0;
}

// ---- instant ---------------------------------------------------------------------------------

namespace {
// The instant model leaves the default thread count only for one that covers the link this much
// better.
constexpr double kClearlyBetter = 1.25;
}  // namespace

TuneResult tune_instant(CopyBench& bench, CudaSession& session, const HostTopology& topology) {
  TuneResult out;
  std::vector<int> cpus;
  for (const GpuPlacement& g : topology.gpus) {
    std::string a = g.pci_bus_id, b = session.pci_bus_id();
    std::transform(a.begin(), a.end(), a.begin(), ::tolower);
    std::transform(b.begin(), b.end(), b.begin(), ::tolower);
    if (a == b) cpus = g.local_cpus;
  }
  const unsigned local =
      cpus.empty() ? std::max(1, topology.processing_units) : static_cast<unsigned>(cpus.size());
  // 1. The link: pinned DMA each way, and CUDA's own pageable path, at 64 MiB.
  const CopyCase up{64 * kMiB, Direction::HostToDevice, 1},
      down{64 * kMiB, Direction::DeviceToHost, 1};
  const double link_up = bench.cuda_pinned(up, 3).median,
               link_down = bench.cuda_pinned(down, 3).median;
  const double cuda_up = bench.cuda_pageable(up, 2).median,
               cuda_down = bench.cuda_pageable(down, 2).median;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "link (pinned, 64 MiB): H2D %.1f GB/s, D2H %.1f GB/s; CUDA's pageable path: "
                "H2D %.1f, D2H %.1f",
                link_up, link_down, cuda_up, cuda_down);
  out.notes.push_back(buf);
  // 2. The CPU: stage-in and drain rates against threads on the GPU's local cores, each with the
  // stores the engine uses for large copies (where the rate matters), on 64 MiB: a tenth of a
  // second each, and the rate a resident buffer gives.
  std::vector<unsigned> counts;
  for (unsigned t : {1u, 2u, 4u, 6u, 8u, 12u, 16u, 24u, 32u})
    if (t < local) counts.push_back(t);
  if (counts.empty()) counts.push_back(1);
  const std::size_t user = 64 * kMiB, ring = 24 * kMiB;
  // Two runs each, the faster kept (of two, the median is the higher): other work on the host
  // only ever slows a run down.
  const auto stage = measure_memcpy_scaling(ScalingCase::StageIn, counts, cpus, user, ring,
                                            CopyMethod::Streaming, 2);
  const auto drain = measure_memcpy_scaling(ScalingCase::DrainOut, counts, cpus, user, ring,
                                            CopyMethod::Streaming, 2);
  std::string line = "CPU copy rate on the GPU's " + std::to_string(local) + " local cores (GB/s):";
  for (std::size_t i = 0; i < counts.size(); ++i) {
    std::snprintf(buf, sizeof(buf), " %u threads: in %.0f, out %.0f;", counts[i],
                  i < stage.size() ? stage[i].gbps : 0.0, i < drain.size() ? drain[i].gbps : 0.0);
    line += buf;
  }
  out.notes.push_back(line);
  out.config = instant_model(link_up, link_down, auto_threads(local), counts, stage, drain, &line);
  out.notes.push_back(line);
  return out;
}

Config instant_model(double link_up, double link_down, unsigned default_threads,
                     const std::vector<unsigned>& counts, const std::vector<ScalingPoint>& stage,
                     const std::vector<ScalingPoint>& drain, std::string* why) {
  // The built-in defaults are what full searches chose on the machine they were measured on
  // (configs/); the model moves only the knobs these measurements speak for, and leaves the
  // rest (store methods by size, lanes, the ramp) to the engine's own rules.
  Config c;
  // Threads: the fewest (the issuer helps as one more) whose copy rate covers the link by 15% in
  // both directions, else the fastest measured. The CPU half must outrun the DMA, or every copy
  // waits on the CPU.
  unsigned threads = counts.empty() ? 1 : counts.back();
  double best_rate = 0;
  for (std::size_t i = 0; i < counts.size() && i < stage.size() && i < drain.size(); ++i) {
    const double rate = std::min(stage[i].gbps / std::max(1e-9, link_up),
                                 drain[i].gbps / std::max(1e-9, link_down));
    if (rate > best_rate) {
      best_rate = rate;
      threads = counts[i];
    }
    if (stage[i].gbps >= 1.15 * link_up && drain[i].gbps >= 1.15 * link_down) {
      threads = counts[i];
      best_rate = rate;
      break;
    }
  }
  // A few tenths of a second of copying are a noisy measure (on the H200 machine 8 threads
  // staged at 21 to 34 GB/s from one run to the next, where the engine stages 48): the default
  // thread count stands unless another covers the link better by a clear margin.
  const auto rate_at = [&](unsigned t) {
    for (std::size_t i = 0; i < counts.size() && i < stage.size() && i < drain.size(); ++i)
      if (counts[i] == t)
        return std::min(stage[i].gbps / std::max(1e-9, link_up),
                        drain[i].gbps / std::max(1e-9, link_down));
    return -1.0;
  };
  const double at_default = rate_at(default_threads);
  bool kept_default = false;
  if (at_default >= 0 && threads != default_threads &&
      (at_default >= 1.15 || best_rate < kClearlyBetter * at_default)) {
    threads = default_threads;
    best_rate = at_default;
    kept_default = true;
  }
  c.threads = threads;
  // Pieces: the defaults' pieces take about 38 us of the H200's link (2 MiB at 55 GB/s): long
  // enough that a DMA's set-up is a small part of it, short enough that the first DMA starts
  // early. A slower link gets pieces of the same time, so the same pipeline depth in time; the
  // ring keeps its bytes (24 MiB), and device-to-host slots stay twice the pieces.
  const double link = std::max(link_up, link_down);
  const double builtin_piece_us = static_cast<double>(c.chunk_bytes) / (55.0 * 1e3);
  std::size_t chunk = 512 * kKiB;
  while (chunk < 4 * kMiB && static_cast<double>(chunk) * 1.5 / (link * 1e3) < builtin_piece_us)
    chunk *= 2;
  const std::size_t ring_bytes = std::size_t{c.slots} * c.chunk_bytes;
  c.d2h_chunk_bytes = c.d2h_chunk_bytes / c.chunk_bytes * chunk;
  c.chunk_bytes = chunk;
  c.slots = slots_for(ring_bytes, chunk);
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "model: %u threads%s (CPU %.0f%% of the link), %s pieces (~%.0f us of link "
                "time each; D2H slots %s), %u slots; store methods, lanes and ramp: the engine's "
                "rules",
                threads, kept_default ? " (the default: no count clearly better)" : "",
                best_rate * 100, format_byte_size(chunk).c_str(),
                static_cast<double>(chunk) / (link * 1e3),
                format_byte_size(c.d2h_chunk_bytes).c_str(), c.slots);
  if (why) *why = buf;
  return c;
}

// ---- full: coordinate descent ------------------------------------------------------------------

namespace {

struct Axis {
  const char* name;
  std::vector<std::function<void(Config&)>> candidates;
  std::vector<std::string> labels;
};

std::vector<Axis> search_axes(unsigned max_threads) {
  std::vector<Axis> axes;
  Axis threads{"threads", {}, {}};
  for (unsigned t : {2u, 4u, 6u, 8u, 10u, 12u, 14u, 16u, 24u, 32u})
    if (t <= max_threads) {
      threads.candidates.push_back([t](Config& c) { c.threads = t; });
      threads.labels.push_back(std::to_string(t) + " threads");
    }
  axes.push_back(threads);
  Axis chunk{"chunk_bytes", {}, {}};
  for (std::size_t b : {1 * kMiB, 2 * kMiB, 4 * kMiB, 8 * kMiB}) {
    // The ring keeps its size in bytes when the chunk changes.
    chunk.candidates.push_back([b](Config& c) {
      std::size_t ring = c.chunk_bytes * c.slots;
      c.chunk_bytes = b;
      c.slots = slots_for(ring, b);
    });
    chunk.labels.push_back(format_byte_size(b) + " chunks");
  }
  axes.push_back(chunk);
  Axis d2h_chunk{"d2h_chunk_bytes", {}, {}};
  for (std::size_t b : {2 * kMiB, 4 * kMiB, 8 * kMiB}) {
    d2h_chunk.candidates.push_back([b](Config& c) { c.d2h_chunk_bytes = b; });
    d2h_chunk.labels.push_back("D2H " + format_byte_size(b) + " chunks");
  }
  axes.push_back(d2h_chunk);
  Axis ring{"slots", {}, {}};
  for (std::size_t r : {16 * kMiB, 32 * kMiB, 64 * kMiB}) {
    ring.candidates.push_back([r](Config& c) { c.slots = slots_for(r, c.chunk_bytes); });
    ring.labels.push_back(format_byte_size(r) + " ring");
  }
  axes.push_back(ring);
  for (int dir = 0; dir < 2; ++dir) {
    Axis method{dir ? "d2h_method" : "h2d_method", {}, {}};
    for (CopyMethod m : {CopyMethod::Auto, CopyMethod::Memcpy, CopyMethod::Streaming}) {
      method.candidates.push_back([m, dir](Config& c) { (dir ? c.d2h_method : c.h2d_method) = m; });
      method.labels.push_back(std::string(dir ? "D2H " : "H2D ") + copy_method_name(m));
    }
    axes.push_back(method);
  }
  return axes;
}

}  // namespace

TuneResult tune_full(const ScoreFn& score_of, const TuneResult& start, unsigned max_threads,
                     const ProgressFn& progress, const std::atomic<bool>& stop) {
  constexpr int kPasses = 3;
  constexpr double kBetter = 1.01;  // a change must win by 1%: measurements vary
  TuneResult out = start;
  out.notes.clear();
  const std::vector<Axis> axes = search_axes(std::max(2u, max_threads));
  int per_pass = 0;
  for (const Axis& a : axes) per_pass += static_cast<int>(a.candidates.size());
  TuneProgress p{0, 2 + per_pass * kPasses, 0, knobs_text(out.config)};
  if (progress) progress(p);
  // From the better of the estimate and the built-in defaults: a model can be far off.
  out.score_gbps = score_of(out.config);
  const Config builtin;
  p.trying = knobs_text(builtin);
  if (progress) progress(p);
  const double builtin_score = stop.load() ? 0 : score_of(builtin);
  out.evaluated = stop.load() ? 1 : 2;
  if (builtin_score > out.score_gbps) {
    out.notes.push_back("start: the built-in defaults (" + gbps_text(builtin_score) +
                        " GB/s) over the estimate (" + gbps_text(out.score_gbps) + ")");
    out.config = builtin;
    out.score_gbps = builtin_score;
  }
  p.done = out.evaluated;
  p.best_gbps = out.score_gbps;
  for (int pass = 0; pass < kPasses; ++pass) {
    bool changed = false;
    for (const Axis& axis : axes) {
      for (std::size_t i = 0; i < axis.candidates.size(); ++i) {
        if (stop.load()) {
          out.interrupted = true;
          return out;
        }
        Config trial = out.config;
        axis.candidates[i](trial);
        p.trying = knobs_text(trial);
        if (progress) progress(p);
        if (same_lane_knobs(trial, out.config)) {
          ++p.done;
          continue;
        }
        double score = score_of(trial);
        ++out.evaluated;
        ++p.done;
        if (score <= out.score_gbps * kBetter) continue;
        // The search keeps the best of many noisy measurements, so a fluke would stick: a
        // candidate that wins is measured again, after the incumbent, and must win again.
        // Stopped before that: the incumbent stays, the winner unconfirmed.
        if (stop.load()) continue;  // caught at the top of the loop
        const double incumbent = score_of(out.config);
        ++out.evaluated;
        if (stop.load()) continue;
        const double again = score_of(trial);
        ++out.evaluated;
        if (again <= incumbent * kBetter) {
          out.score_gbps = incumbent;
          continue;
        }
        out.notes.push_back("pass " + std::to_string(pass + 1) + ": " + axis.labels[i] + " -> " +
                            gbps_text(again) + " GB/s (against " + gbps_text(incumbent) + ")");
        out.config = trial;
        out.score_gbps = again;
        p.best_gbps = again;
        changed = true;
      }
    }
    if (!changed) {
      p.total = p.done;  // converged: no knob moved in a whole pass
      break;
    }
  }
  if (progress) progress(p);
  return out;
}

TuneResult confirm_against_builtin(const ScoreFn& score_of, const TuneResult& chosen, int rounds,
                                   double margin, const std::atomic<bool>& stop) {
  TuneResult out = chosen;
  const Config builtin;
  if (same_lane_knobs(chosen.config, builtin) || chosen.interrupted) return out;
  std::vector<double> mine, theirs;
  for (int r = 0; r < rounds && !stop.load(); ++r) {  // alternating, so drift hits both alike
    mine.push_back(score_of(chosen.config));
    theirs.push_back(score_of(builtin));
    out.evaluated += 2;
  }
  if (mine.empty()) return out;
  const double m = summarize(mine).median, b = summarize(theirs).median;
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "confirm: the choice %.1f GB/s, the built-in defaults %.1f (medians of %zu "
                "alternating rounds, %.3fx): %s",
                m, b, mine.size(), m / std::max(1e-9, b),
                m >= b * margin ? "choice kept" : "the defaults kept instead");
  out.notes.push_back(buf);
  if (m >= b * margin) {
    out.score_gbps = m;
  } else {
    copy_lane_knobs(out.config, builtin);
    out.score_gbps = b;
  }
  return out;
}

TuneResult tune_grid(const ScoreFn& score_of, const ProgressFn& progress,
                     const std::atomic<bool>& stop) {
  TuneResult out;
  std::vector<Config> space;
  for (unsigned t : {4u, 8u, 12u})
    for (std::size_t chunk : {1 * kMiB, 2 * kMiB, 4 * kMiB})
      for (std::size_t ring : {16 * kMiB, 32 * kMiB})
        for (CopyMethod h2d : {CopyMethod::Auto, CopyMethod::Memcpy, CopyMethod::Streaming}) {
          Config c;
          c.threads = t;
          c.chunk_bytes = chunk;
          c.slots = slots_for(ring, chunk);
          c.h2d_method = h2d;
          c.d2h_method = CopyMethod::Streaming;
          space.push_back(c);
        }
  TuneProgress p{0, static_cast<int>(space.size()), 0, ""};
  for (const Config& c : space) {
    if (stop.load()) {
      out.interrupted = true;
      break;
    }
    p.trying = knobs_text(c);
    if (progress) progress(p);
    double score = score_of(c);
    ++out.evaluated;
    ++p.done;
    out.notes.push_back(knobs_text(c) + ": " + std::to_string(score).substr(0, 5) + " GB/s");
    if (score > out.score_gbps) {
      out.score_gbps = score;
      out.config = c;
      p.best_gbps = score;
    }
  }
  if (progress) progress(p);
  return out;
}

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
  std::string line = "threshold: cmt/CUDA asleep at", warm_line = "warm_threshold: cmt/CUDA warm at";
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
    if (m.first == CopyEngine::kAutoLanes) auto_rate = m.second;
  unsigned best = 0;
  double best_rate = auto_rate * 1.02;
  for (const auto& m : measured)
    if (m.first != CopyEngine::kAutoLanes && m.second > best_rate) {
      best = m.first;
      best_rate = m.second;
    }
  return auto_rate > 0 ? best : 0;  // without the rule's own figure, keep the rule
}

unsigned measure_lanes(CopyBench& bench, const Config& config, std::vector<std::string>* notes) {
  constexpr unsigned kCallers = 8;
  const unsigned candidates[] = {1, 2, 4};
  const std::size_t bytes = std::min<std::size_t>(64 * kMiB, bench.largest() / kCallers / 4096 * 4096);
  std::vector<std::vector<double>> rates(std::size(candidates));
  for (int round = 0; round < 3; ++round)
    for (std::size_t k = 0; k < std::size(candidates); ++k) {
      Config c = config;
      c.lanes = candidates[(k + round) % std::size(candidates)];  // rotate which goes first
      rates[(k + round) % std::size(candidates)].push_back(
          bench.cmt_concurrent(c, kCallers, bytes, 4));
    }
  std::vector<std::pair<unsigned, double>> measured;
  std::string line = "lanes: 8 callers x " + format_byte_size(bytes) +
                     ", half each way, own streams, GB/s at";
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
                  gpu_cores_name(picked));
    notes->push_back(buf);
  }
  return picked;
}

namespace {

// From the largest of `sizes` down, the smallest size at which `speedup(n)` (the copy threads
// over one thread) is still at least 1.2; `never` if the largest already falls short. Each ratio
// is added to `line`.
std::size_t smallest_winning_size(const std::vector<std::size_t>& sizes, std::size_t never,
                                  const std::function<double(std::size_t)>& speedup,
                                  std::string& line) {
  std::size_t threshold = never;
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    const double ratio = speedup(*it);
    char buf[48];
    std::snprintf(buf, sizeof(buf), " %s %.2f;", format_byte_size(*it).c_str(), ratio);
    line += buf;
    if (ratio < 1.2) break;  // from the largest size down: stop where it stops winning
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
    HostCopier copier(c, c.threads ? c.threads : auto_threads(cpus.size()), cpus);
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
    HostCopier copier(c, c.threads ? c.threads : auto_threads(cpus.size()), cpus);
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
