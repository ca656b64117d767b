// What idle copy threads cost the program beside them, and how soon a napping thread wakes (session
// 37, bench/lab/NOTES.md 80). Written when offloaded inference seemed to spend a third longer in
// its own work between copies under staging than with pinned weights; read pass by pass in one
// process, it did not (NOTES.md 82: the thread's time between calls is the same in every mode).
// Three measurements:
//
//   work   the calling thread runs a fixed piece of work (integer hashing over a 256 KiB table,
//          about the size of a Python interpreter's hot working set) again and again, alone and
//          then with N other threads spinning (a relaxed load and a pause, as cmt's idle workers
//          do) pinned one to each of the first N CPUs, the caller unpinned as a program's thread
//          is; the work's median time with the spinners over its time alone;
//   after  the same work right after 8 threads have copied 24 MiB (a layer's weights) from a
//          2 GiB source (a new part each time) into a buffer with streaming stores, as cmt's
//          staging does: threads made afresh for each copy (they have ended when the work runs),
//          or a pool of long-lived ones (as cmt's); the source prefetched with the non-temporal
//          hint or not; memcpy instead of streaming stores; the work at once or after a 200 us
//          sleep (what the program does between a copy and its next work); the copiers pinned to
//          CPUs 0-7 and the work to another; the work's first run and a second at once after it;
//          the variants, and the work after no copy as their reference, take turns 5
//          repetitions at a time (run one after another, they took a VM's drifting load as it
//          came: NOTES.md 81);
//   beside the work on the last CPU while one thread streams on CPU k, for each k in turn (on a
//          VM, a CPU that shares a host core with the work's would slow it most; one after
//          another, these too drift with the host's load);
//   nap    a thread waits on a futex with a timeout of T us, as a napping worker does; how late
//          the wait ends past T (median, 90th and 99th percentile), alone and with N threads
//          napping at once.
//
// usage: cmt-lab-spin-cost [--spinners 0,4,8,12,15] [--reps 400]
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <immintrin.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t ns_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void unpin() {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c = 0; c < std::thread::hardware_concurrency() && c < CPU_SETSIZE; ++c)
    CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// The fixed piece of work: hashing walks over a table of 64 Ki words.
std::uint64_t work_once(std::vector<std::uint64_t>& table) {
  std::uint64_t h = 1469598103934665603ull, at = 0;
  for (int i = 0; i < 20000; ++i) {
    at = (at + (h >> 7)) & (table.size() - 1);
    h = (h ^ table[at]) * 1099511628211ull;
    table[at] += h & 3;
  }
  return h;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()))];
}

// A copy of `n` bytes with loads and streaming stores, as cmt's staging copies (cpu_copy.cpp);
// with `nta`, each source line is first prefetched with the non-temporal hint, which keeps it out
// of most of the cache hierarchy.
__attribute__((target("avx2"))) void stream_copy(char* d, const char* s, std::size_t n, bool nta) {
#if defined(__x86_64__)
  for (; n >= 128; n -= 128, d += 128, s += 128) {
    if (nta) {
      _mm_prefetch(s + 1024, _MM_HINT_NTA);
      _mm_prefetch(s + 1024 + 64, _MM_HINT_NTA);
    }
    for (int k = 0; k < 128; k += 32)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + k),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k)));
  }
  _mm_sfence();
#else
  std::memcpy(d, s, n);
#endif
}

// How the copy before the work is made.
struct CopyBefore {
  bool copy = true;     // false: no copy at all (the reference, measured in the same turns)
  bool pool = false;    // by 8 long-lived threads (they spin between copies), not 8 made afresh
  bool nta = false;     // the source prefetched with the non-temporal hint
  bool plain = false;   // memcpy (the C library's) instead of streaming stores
  int delay_us = 0;     // a sleep between the copy's end and the work
  int caller_cpu = -1;  // >= 0: the caller pinned there and the copiers to CPUs 0-7
  bool caller_share = false;  // the caller copies one of the 8 parts itself (pool: 7 threads)
};

// The work's times right after each copy: the first run, and a second at once after it (a cold
// cache costs the first only; a slower core costs both).
struct AfterTimes {
  std::vector<double> first, second;
};

// The work right after 8 threads copied 24 MiB, each copy from a new part of a 2 GiB source. The
// source, the destination and the work's table live as long as this, so that the variants can
// take turns a few repetitions at a time: on a VM the host's load drifts over seconds, and
// variants run one after another took it as it came (NOTES.md 81).
class AfterCopies {
 public:
  AfterCopies()
      : source_(kSource, 1),
        dest_(static_cast<char*>(std::aligned_alloc(64, kCopy))),  // streaming stores: aligned
        table_(1 << 16, 7) {
    std::memset(dest_, 0, kCopy);
  }
  ~AfterCopies() {
    std::free(dest_);
    if (sink_ == 42) std::puts("");
  }

  // `reps` more times of the work after a copy made as `how` says, added to `out`.
  void run(int reps, const CopyBefore& how, AfterTimes& out) {
    const bool placed = how.caller_cpu >= 0;
    if (placed) pin_to(how.caller_cpu);
    auto copy_part = [&](int t) {
      const std::size_t part = kCopy / kCopiers;
      if (how.plain)
        std::memcpy(dest_ + t * part, from_ + t * part, part);
      else
        stream_copy(dest_ + t * part, from_ + t * part, part, how.nta);
    };
    std::atomic<int> generation{0}, done{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> pool;
    const int helpers = how.caller_share ? kCopiers - 1 : kCopiers;  // the caller copies the last
    for (int t = 0; how.copy && how.pool && t < helpers; ++t)
      pool.emplace_back([&, t] {
        if (placed) pin_to(t);
        for (int seen = 0;;) {
          while (generation.load(std::memory_order_acquire) == seen && !stop.load()) cpu_relax();
          if (stop.load()) return;
          seen = generation.load(std::memory_order_acquire);
          copy_part(t);
          done.fetch_add(1, std::memory_order_acq_rel);
        }
      });
    for (int r = 0; r < reps; ++r) {
      from_ = source_.data() + (turn_++ * kCopy) % (kSource - kCopy);
      if (!how.copy) {
      } else if (how.pool) {
        done.store(0);
        generation.fetch_add(1, std::memory_order_acq_rel);
        if (how.caller_share) copy_part(kCopiers - 1);
        while (done.load(std::memory_order_acquire) < helpers) cpu_relax();
      } else {
        std::vector<std::thread> copiers;
        for (int t = 0; t < kCopiers; ++t)
          copiers.emplace_back([&, t] {
            if (placed) pin_to(t);
            copy_part(t);
          });
        for (auto& c : copiers) c.join();
      }
      if (how.delay_us) std::this_thread::sleep_for(std::chrono::microseconds(how.delay_us));
      auto t0 = Clock::now();
      sink_ += work_once(table_);
      out.first.push_back(ns_since(t0) / 1e3);
      t0 = Clock::now();
      sink_ += work_once(table_);
      out.second.push_back(ns_since(t0) / 1e3);
    }
    stop.store(true);
    for (auto& t : pool) t.join();
    if (placed) unpin();
  }

 private:
  static constexpr std::size_t kSource = std::size_t{2} << 30, kCopy = std::size_t{24} << 20;
  static constexpr int kCopiers = 8;
  std::vector<char> source_;
  char* dest_;
  std::vector<std::uint64_t> table_;
  const char* from_ = nullptr;
  std::size_t turn_ = 0;
  std::uint64_t sink_ = 0;
};

// The work's times (us) with `spinners` threads spinning on CPUs 0.. .
std::vector<double> work_times(int spinners, int reps) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> spin;
  for (int i = 0; i < spinners; ++i)
    spin.emplace_back([&, i] {
      pin_to(i);
      while (!stop.load(std::memory_order_relaxed)) cpu_relax();
    });
  std::vector<std::uint64_t> table(1 << 16, 7);
  std::vector<double> us;
  std::uint64_t sink = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    sink += work_once(table);
    us.push_back(ns_since(t0) / 1e3);
  }
  stop.store(true);
  for (auto& t : spin) t.join();
  if (sink == 42) std::puts("");
  return us;
}

// The work's times (us) on CPU `caller` while one thread on CPU `other` streams 32 MiB to and fro
// without pause (`other` < 0: alone). On a VM whose CPUs are hyperthreads of the host's cores, the
// CPU that shares a core with the caller's slows its work far more than the rest do.
std::vector<double> work_beside_streamer(int caller, int other, int reps) {
  constexpr std::size_t kHalf = std::size_t{32} << 20;
  char* buf = static_cast<char*>(std::aligned_alloc(64, 2 * kHalf));
  std::memset(buf, 1, 2 * kHalf);
  std::atomic<bool> stop{false};
  std::thread streamer;
  if (other >= 0)
    streamer = std::thread([&] {
      pin_to(other);
      for (int turn = 0; !stop.load(std::memory_order_relaxed); turn ^= 1)
        stream_copy(buf + (turn ? kHalf : 0), buf + (turn ? 0 : kHalf), kHalf, false);
    });
  pin_to(caller);
  std::vector<std::uint64_t> table(1 << 16, 7);
  std::vector<double> us;
  std::uint64_t sink = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    sink += work_once(table);
    us.push_back(ns_since(t0) / 1e3);
  }
  stop.store(true);
  if (streamer.joinable()) streamer.join();
  unpin();
  std::free(buf);
  if (sink == 42) std::puts("");
  return us;
}

// How late a futex wait of `nap_us` ends past it (us), with `threads` napping at once.
std::vector<double> nap_lateness(int nap_us, int threads, int reps) {
  std::atomic<std::uint32_t> word{0};
  std::vector<std::vector<double>> late(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      timespec nap{0, nap_us * 1000L};
      for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, 0u, &nap,
                nullptr, 0);
        late[t].push_back(ns_since(t0) / 1e3 - nap_us);
      }
    });
  for (auto& t : ts) t.join();
  std::vector<double> all;
  for (auto& v : late) all.insert(all.end(), v.begin(), v.end());
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> spinners = {0, 4, 8, 12, 15};
  int reps = 400;
  CLI::App app{"What spinning threads cost the thread beside them, and how late naps end"};
  app.add_option("--spinners", spinners, "Spinning threads beside the work")->delimiter(',');
  app.add_option("--reps", reps, "Repetitions of each measurement")->check(CLI::Range(10, 100000));
  CLI11_PARSE(app, argc, argv);
  const unsigned cpus = std::thread::hardware_concurrency();
  std::printf("%u CPUs\n", cpus);
  const double alone = median(work_times(0, reps));
  std::printf("work alone: median %.1f us\n", alone);
  for (int n : spinners) {
    if (n <= 0 || static_cast<unsigned>(n) >= cpus) continue;
    const std::vector<double> t = work_times(n, reps);
    std::printf("work with %2d spinning threads: median %.1f us (%.2fx alone), 90th %.1f us\n", n,
                median(t), median(t) / alone, pct(t, 0.9));
  }
  const struct {
    const char* what;
    CopyBefore how;
  } befores[] = {
      {"no copy (the reference, in the same turns)", {false}},
      {"8 threads made afresh streamed 24 MiB", {true, false, false, false, 0}},
      {"8 threads made afresh streamed 24 MiB (source prefetched non-temporally)",
       {true, false, true, false, 0}},
      {"a pool of 8 threads streamed 24 MiB", {true, true, false, false, 0}},
      {"a pool of 8 threads streamed 24 MiB, then a 200 us sleep", {true, true, false, false, 200}},
      {"a pool of 8 threads streamed 24 MiB, then a 2 ms sleep", {true, true, false, false, 2000}},
      {"a pool of 8 threads memcpy'd 24 MiB", {true, true, false, true, 0}},
      {"a pool of 8 threads streamed 24 MiB (source prefetched non-temporally)",
       {true, true, true, false, 0}},
      {"a pool of 7 threads and the caller streamed 24 MiB (as cmt's caller helps)",
       {true, true, false, false, 0, -1, true}},
      {"a pool of 8 threads on CPUs 0-7 streamed 24 MiB, the work on CPU 8",
       {true, true, false, false, 0, 8}},
      {"a pool of 8 threads on CPUs 0-7 streamed 24 MiB, the work on CPU 15",
       {true, true, false, false, 0, 15}},
      {"8 threads made afresh on CPUs 0-7 streamed 24 MiB, the work on CPU 8",
       {true, false, false, false, 0, 8}},
  };
  // The variants take turns, 5 repetitions at a time.
  constexpr int kTurn = 5;
  const int turns = std::max(1, std::min(reps, 200) / kTurn);
  std::vector<AfterTimes> after(std::size(befores));
  {
    AfterCopies bench;
    for (int turn = 0; turn < turns; ++turn)
      for (std::size_t v = 0; v < std::size(befores); ++v)
        bench.run(kTurn, befores[v].how, after[v]);
  }
  const double reference = median(after[0].first);
  std::printf("work after no copy, in the same turns as the copies: median %.1f us\n", reference);
  for (std::size_t v = 1; v < std::size(befores); ++v) {
    const AfterTimes& t = after[v];
    std::printf(
        "work right after %s: median %.1f us (%.2fx no copy), 90th %.1f us; run again at once "
        "%.1f us (%.2fx)\n",
        befores[v].what, median(t.first), median(t.first) / reference, pct(t.first, 0.9),
        median(t.second), median(t.second) / reference);
  }
  const int caller = static_cast<int>(cpus) - 1;
  const double pinned_alone = median(work_beside_streamer(caller, -1, reps / 2));
  std::printf("work on CPU %d alone: median %.1f us; beside one thread streaming on CPU k:", caller,
              pinned_alone);
  for (int k = 0; k < caller; ++k)
    std::printf(" %d:%.2fx", k, median(work_beside_streamer(caller, k, reps / 2)) / pinned_alone);
  std::printf("\n");
  for (int nap : {50, 100, 200, 400})
    for (int threads : {1, 8}) {
      const std::vector<double> late = nap_lateness(nap, threads, reps / 4);
      std::printf("nap %3d us, %d thread(s): ends late by median %.1f us, 90th %.1f, 99th %.1f\n",
                  nap, threads, median(late), pct(late, 0.9), pct(late, 0.99));
    }
  return 0;
}
