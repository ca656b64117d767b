// What cmt did inside a process: copies taken (calls, bytes, time in the engine, per direction,
// and GPU to GPU through the host), copies forwarded, per reason, and host copies (memcpy/memmove) taken. Lock-free counters; written as JSON at exit when asked.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "interposer/classify.h"

namespace cmt {

// Which of cmt's hooks took a copy: a CUDA runtime entry point (cudaMemcpy*) or a driver one
// (cuMemcpy*, reached directly, through dlsym or through cuGetProcAddress).
// Which kind of entry point a taken copy came through: a runtime hook, a driver hook, or one copy
// of a batch (cuMemcpyBatchAsync, batch_copy.h).
enum class Entry { Runtime, Driver, Batch };

class Stats {
 public:
  void taken(Direction d, Entry entry, std::uint64_t bytes, std::uint64_t nanoseconds);
  // A GPU-to-GPU copy through the host (engine/peer/peer_copier.h); `nanoseconds` is the time in the call
  // (an asynchronous one's is only its enqueueing).
  void taken_peer(Entry entry, std::uint64_t bytes, std::uint64_t nanoseconds);
  void forwarded(ForwardReason reason, std::uint64_t calls = 1);
  void partial() { partial_.fetch_add(1, std::memory_order_relaxed); }  // engine stopped short
  // A context that ended where no hook of cmt's saw it, found at a copy (context_watch.h).
  void unseen_context_end() { unseen_context_ends_.fetch_add(1, std::memory_order_relaxed); }
  // A D2H copy into memory never written before, `bytes` of it prepared (engine/shared/fresh_pages.h).
  void fresh(std::uint64_t bytes) {
    fresh_calls_.fetch_add(1, std::memory_order_relaxed);
    fresh_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  // A taken host <-> device copy enters and leaves the engine: the time at least one copy of a
  // direction (and of either) was in the engine, so that bytes over it stay true when copies run
  // at once, where the sum of their times counts each overlap again.
  void copy_started(Direction d, std::uint64_t now_ns);
  void copy_ended(Direction d, std::uint64_t now_ns);
  // Copies made from cmt's registrations of hot buffers (register_cache.h): they are also counted
  // as taken. `cache` gives the registrations' own counts to the JSON and the summary.
  void hot(std::uint64_t bytes) {
    hot_calls_.fetch_add(1, std::memory_order_relaxed);
    hot_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  // And small copies beside a registration, made through pinned scratch (hot_copy.h).
  void beside_hot(std::uint64_t bytes) {
    beside_calls_.fetch_add(1, std::memory_order_relaxed);
    beside_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void set_register_cache(const class RegisterCache* cache) { register_cache_ = cache; }
  // `copy_threads_cpu_s`: the CPU time cmt's copy threads used (Interposer::copy_threads_cpu_
  // seconds), given with the bytes cmt took, per GB: what speed cost in `top`, their spinning
  // included. Negative: not known, left out.
  std::string to_json(double copy_threads_cpu_s = -1) const;
  // One line for people: copies taken per direction (calls, bytes, GB/s) and forwards by reason.
  std::string summary(double copy_threads_cpu_s = -1) const;
  std::uint64_t taken_calls() const;
  // Every copy call cmt was offered, taken or forwarded: 0 in a process that made none.
  std::uint64_t offered_calls() const;
  std::string sizes_json() const;
  // The host copier's counts (memcpy/memmove calls taken, bytes, GB/s), as a JSON object.
  static std::string host_copies_json();
  // Every byte cmt took: copies (host <-> device, from its registrations too, GPU to GPU through
  // the host), host copies, fills and file reads; what the copy threads' CPU time is set against.
  std::uint64_t bytes_taken() const;

 private:
  struct PerDirection {
    std::atomic<std::uint64_t> calls{0}, bytes{0}, nanoseconds{0};
  };
  PerDirection h2d_, d2h_, peer_;
  // The union of copies' times in the engine: h2d, d2h, either.
  struct InFlight {
    std::mutex mu;
    int active = 0;
    std::uint64_t since_ns = 0, total_ns = 0;
    void enter(std::uint64_t now);
    void leave(std::uint64_t now);
    std::uint64_t ns();
  };
  mutable InFlight in_flight_[3];
  static double in_flight_gbps(std::uint64_t bytes, std::uint64_t ns);
  std::atomic<std::uint64_t> via_runtime_{0}, via_driver_{0}, via_batch_{0};
  std::atomic<std::uint64_t>& via(Entry entry);
  // Taken copies by size (bucket b holds sizes in [2^b, 2^(b+1))) and direction: the mix that
  // `cmt tune -- CMD` tunes for.
  static constexpr int kBuckets = 48;
  std::atomic<std::uint64_t> size_calls_[2][kBuckets] = {}, size_bytes_[2][kBuckets] = {};
  std::atomic<std::uint64_t> forwarded_[static_cast<int>(ForwardReason::Count)] = {};
  std::atomic<std::uint64_t> partial_{0};
  std::atomic<std::uint64_t> unseen_context_ends_{0};
  std::atomic<std::uint64_t> fresh_calls_{0}, fresh_bytes_{0};
  std::atomic<std::uint64_t> hot_calls_{0}, hot_bytes_{0};
  std::atomic<std::uint64_t> beside_calls_{0}, beside_bytes_{0};
  const class RegisterCache* register_cache_ = nullptr;
  std::string register_json() const;
};

}  // namespace cmt
