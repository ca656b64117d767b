#include "copy_bench.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

namespace cmt {
namespace {

char* map_touched(std::size_t bytes, unsigned seed) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* c = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) c[i] = static_cast<unsigned char>(i * 131 + seed);
  return static_cast<char*>(p);
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
  return rate_of(gbps);
}

}  // namespace

Rate rate_of(std::vector<double> gbps) {
  if (gbps.empty()) return {};
  std::sort(gbps.begin(), gbps.end());
  return {gbps[gbps.size() / 2], gbps.front(), gbps.back()};
}

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

CopyEngine& CopyBench::engine_for(const Config& asked) {
  // The measurements' idles are all alike, and threads that wake ahead of a copy they expect
  // would be awake for each: measured asleep, the engine must not wake ahead (a program's gaps
  // are rarely so regular), and measured warm it never would (its gaps are within the spin).
  Config config = asked;
  config.wake_ahead = false;
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
  // By default each copy starts with the engine's workers asleep (they spin spin_us after their
  // last job), as in an application that does other work between copies, and as in
  // cmt-bench-copy --gap-us, by which cmt is judged. Timed back to back, every copy but the first
  // would find them still spinning, and a search could favour knobs that only win then.
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

}  // namespace cmt
