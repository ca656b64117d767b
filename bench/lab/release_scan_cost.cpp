// cmt-lab-release-scan (lab, CPU only): what one release report costs the hot buffers' cache
// (interposer/register_cache.h) when it holds many candidates: the free() of a chunk of 64 KiB or
// more inside the watched span reports it (libcmt-release.so), and the cache drops the candidates
// and registrations it overlaps. Fills the cache with N candidates 1 MiB apart (copies of 256 KiB
// that never register: no driver is called), then times reports that hit none and reports that
// each drop one (offered again after, so the table stays full), then copies of new ranges (each
// taking the least recently copied candidate's slot once the table is full). NOTES.md 54.
// Then, with N ranges registered (a stand-in driver whose registering always succeeds), what a
// hot copy's lookups cost: the interposer asks touches() then find() for every copy, and a
// pointer query asks touches() (NOTES.md 56).
//
// usage: cmt-lab-release-scan [--candidates 4096] [--reports 200000]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>

#include "bench_cli.h"
#include "cuda/driver_api.h"
#include "interposer/register_cache.h"

namespace {

CUresult registered(void*, size_t, unsigned) { return CUDA_SUCCESS; }
CUresult unregistered(void*) { return CUDA_SUCCESS; }
CUresult capture_mode(CUstreamCaptureMode*) { return CUDA_SUCCESS; }

struct LookupCosts {
  double copy_ns = -1, release_ns = -1;
};

// With `count` ranges registered, 1 MiB apart: ns per hot copy's lookups (touches, then find),
// and per release report between two registrations (a free in the watched span that hits none).
LookupCosts lookup_costs(int count, int lookups) {
  cmt::DriverApi driver{};
  driver.mem_host_register = registered;
  driver.mem_host_unregister = unregistered;
  driver.thread_exchange_capture_mode = capture_mode;
  cmt::RegisterSettings settings;
  settings.after = 1;
  const std::uintptr_t base = 0x200000000000;
  auto start_of = [&](int i) { return base + (static_cast<std::uintptr_t>(i) << 20); };
  cmt::RegisterCache cache(
      driver, settings,
      [](const void* p, std::size_t bytes) {
        cmt::TrackableRange r;
        r.ok = true;
        r.lo = reinterpret_cast<std::uintptr_t>(p);
        r.hi = r.lo + ((bytes + 4095) & ~std::size_t{4095});
        return r;
      },
      [](std::uintptr_t, std::uintptr_t, std::size_t) {});
  for (int i = 0; i < count; ++i)
    if (!cache.offer(reinterpret_cast<const void*>(start_of(i)), 256u << 10)) return {};
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::uint64_t found = 0;
  for (int k = 0; k < lookups; ++k) {
    // Spread over the ranges (a model's weights, layer after layer).
    const auto* p = reinterpret_cast<const void*>(start_of(static_cast<int>(
        (static_cast<std::uint64_t>(k) * 2654435761u) % static_cast<unsigned>(count))));
    found += cache.touches(p, 256u << 10);
    found += static_cast<bool>(cache.find(p, 256u << 10));
  }
  LookupCosts costs;
  costs.copy_ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / lookups;
  if (found != 2ull * static_cast<unsigned>(lookups)) return {};
  const auto t1 = Clock::now();
  for (int k = 0; k < lookups; ++k) {
    const std::uintptr_t lo = start_of(k % count) + (512u << 10);
    cache.chunk_released(lo, lo + (64u << 10));
  }
  costs.release_ns = std::chrono::duration<double, std::nano>(Clock::now() - t1).count() / lookups;
  if (cache.counts().registrations != static_cast<unsigned>(count) ||
      cache.counts().invalidations != 0)
    return {};
  return costs;
}

}  // namespace

int main(int argc, char** argv) {
  int candidates = 4096, reports = 200000;
  CLI::App app{"cmt-lab-release-scan: a release report's cost to the hot buffers' cache"};
  app.add_option("--candidates", candidates, "Candidates in the cache")
      ->check(CLI::Range(1, 4096));
  app.add_option("--reports", reports, "Reports timed of each kind")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const cmt::DriverApi no_driver{};  // never called: nothing is registered
  cmt::RegisterSettings settings;
  settings.after = 1u << 30;
  cmt::RegisterCache cache(
      no_driver, settings,
      [](const void*, std::size_t) { return cmt::TrackableRange{}; },
      [](std::uintptr_t, std::uintptr_t, std::size_t) {});
  const std::uintptr_t base = 0x100000000000;
  auto start_of = [&](int i) { return base + (static_cast<std::uintptr_t>(i) << 20); };
  for (int i = 0; i < candidates; ++i)
    cache.offer(reinterpret_cast<const void*>(start_of(i)), 256u << 10);
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  for (int k = 0; k < reports; ++k) {  // past each candidate's end: hits none
    const std::uintptr_t lo = start_of(k % candidates) + (512u << 10);
    cache.chunk_released(lo, lo + (64u << 10));
  }
  const double miss = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / reports;
  t0 = Clock::now();
  for (int k = 0; k < reports; ++k) {  // inside one candidate: drops it, then it comes back
    const std::uintptr_t lo = start_of(k % candidates);
    cache.chunk_released(lo + 4096, lo + 8192);
    cache.offer(reinterpret_cast<const void*>(lo), 256u << 10);
  }
  const double hit = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / reports;
  // Copies of new ranges (past the others): with the table full each takes the least recently
  // copied candidate's slot.
  t0 = Clock::now();
  for (int k = 0; k < reports; ++k)
    cache.offer(reinterpret_cast<const void*>(start_of(candidates + k)), 256u << 10);
  const double fresh = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / reports;
  std::printf("%d candidates: a report that hits none %.0f ns; one that drops a candidate (and "
              "the copy that makes it again) %.0f ns; a copy of a new range %.0f ns\n",
              candidates, miss, hit, fresh);
  for (int count : {1, 16, 160, 1024, 4096}) {
    const LookupCosts c = lookup_costs(count, reports);
    std::printf("%d ranges registered: a hot copy's lookups (touches, find) %.0f ns; a release "
                "report between two of them %.0f ns\n", count, c.copy_ns, c.release_ns);
  }
  return 0;
}
