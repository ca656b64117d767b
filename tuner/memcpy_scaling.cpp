#include "memcpy_scaling.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "engine/shared/cpu_copy.h"
#include "engine/shared/fresh_pages.h"

namespace cmt {
namespace {

bool is_fresh(ScalingCase which) {
  return which == ScalingCase::DrainOutFresh || which == ScalingCase::DrainOutFreshHuge ||
         which == ScalingCase::DrainOutFreshPopulate;
}

// Prepares [base, base + n) the way the case asks before the copy writes it (timed with it).
void prepare_fresh(ScalingCase which, char* base, std::size_t n) {
  if (which == ScalingCase::DrainOutFreshPopulate)
    (void)populate_range(base, n);  // an old kernel refuses: the pages fault as usual
  else if (which == ScalingCase::DrainOutFreshHuge)
    advise_huge_pages(whole_blocks(base, n));
}

char* map(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

double run_once(ScalingCase which, unsigned threads, const std::vector<int>& cpus, char* user,
                std::size_t user_bytes, char* ring, std::size_t ring_bytes, CopyMethod method) {
  const std::size_t slice = ring_bytes / threads;
  const std::size_t piece = std::min<std::size_t>(slice, 1 << 20);
  const std::size_t share = user_bytes / threads;
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      if (!cpus.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int c : cpus) CPU_SET(c, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
      }
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      char* mine = ring + t * slice;
      char* base = user + t * share;
      prepare_fresh(which, base, share);
      std::size_t slot = 0;
      for (std::size_t off = 0; off < share; off += piece) {
        std::size_t n = std::min(piece, share - off);
        char* staging = mine + (slot * piece) % (slice - slice % piece);
        ++slot;
        if (which == ScalingCase::StageIn)
          copy_memcpy(staging, base + off, n);
        else if (method == CopyMethod::Memcpy)
          copy_memcpy(base + off, staging, n);
        else
          copy_streaming(base + off, staging, n);
      }
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  auto t0 = std::chrono::steady_clock::now();
  go.store(true);
  for (auto& t : pool) t.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(share * threads) / s / 1e9;
}

}  // namespace

std::vector<ScalingPoint> measure_memcpy_scaling(ScalingCase which,
                                                 const std::vector<unsigned>& threads,
                                                 const std::vector<int>& cpus,
                                                 std::size_t user_bytes, std::size_t ring_bytes,
                                                 CopyMethod method, int reps) {
  std::vector<ScalingPoint> out;
  char* ring = map(ring_bytes);
  char* user = is_fresh(which) ? nullptr : map(user_bytes);
  if (!ring || (!is_fresh(which) && !user)) return out;
  std::memset(ring, 1, ring_bytes);
  if (user) std::memset(user, 2, user_bytes);
  for (unsigned t : threads) {
    if (t == 0) continue;
    std::vector<double> rates;
    for (int r = 0; r < std::max(1, reps); ++r) {
      char* target = user;
      if (is_fresh(which) && !(target = map(user_bytes))) break;
      rates.push_back(run_once(which, t, cpus, target, user_bytes, ring, ring_bytes, method));
      if (is_fresh(which)) munmap(target, user_bytes);
    }
    if (rates.empty()) continue;
    std::sort(rates.begin(), rates.end());
    out.push_back({t, rates[rates.size() / 2]});
  }
  if (user) munmap(user, user_bytes);
  munmap(ring, ring_bytes);
  return out;
}

}  // namespace cmt
