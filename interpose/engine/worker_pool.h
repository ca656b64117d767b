// A persistent pool of CPU threads that run the units of one job at a time: the issuing thread
// publishes unit indices as they become runnable (a staging slot frees up, a DMA lands) and the
// workers claim them in order. Workers are pinned to the GPU's local cores, block every signal
// (the host application's handlers never run on them), spin briefly when idle and then sleep.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace cmt {

class UnitTask {
 public:
  virtual ~UnitTask() = default;
  virtual void run_unit(std::size_t index) = 0;
};

class WorkerPool {
 public:
  // Starts `threads` workers allowed on `cpus` (empty: anywhere); an idle worker spins for
  // `idle_spin` before it sleeps, bridging the gaps between units and between back-to-back
  // copies. Throws std::system_error if a thread cannot start; the caller then forwards.
  WorkerPool(unsigned threads, const std::vector<int>& cpus,
             std::chrono::microseconds idle_spin = std::chrono::microseconds(1000));
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(threads_.size()); }

  // Wakes sleeping workers ahead of a job, so they are spinning by the time work is published
  // (waking a sleeping core can take tens of microseconds, in a VM more).
  void wake();

  // Begins a job; units [0, limit) become claimable as publish(limit) raises the limit.
  void begin(UnitTask* task);
  void publish(std::size_t limit);
  // Units finished so far (in any order); the issuer reads it to know when all are done.
  std::size_t finished() const { return finished_.load(std::memory_order_acquire); }
  // Runs one claimable unit on the calling thread, if there is one, so an issuer with nothing
  // to issue helps instead of spinning. Returns whether it ran a unit.
  bool help() { return try_run_one(); }
  // Waits until every published unit has run and no worker still holds the task.
  void end();

  // True on a pool's worker thread (false on the issuer helping), for timing traces.
  static bool on_worker_thread() { return t_worker_; }

 private:
  void worker_main();
  bool try_run_one();
  bool has_claimable() const;

  const std::chrono::microseconds idle_spin_;
  std::vector<std::thread> threads_;
  // Each counter on its own cache line: idle workers poll published_ while the issuer writes it,
  // and must not slow each other down through a shared line.
  alignas(64) std::atomic<UnitTask*> task_{nullptr};
  alignas(64) std::atomic<std::size_t> published_{0};
  alignas(64) std::atomic<std::size_t> claimed_{0};
  alignas(64) std::atomic<std::size_t> finished_{0};
  alignas(64) std::atomic<int> inside_{0};  // workers that may hold a task pointer right now
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<std::uint32_t> wake_seq_{0};  // futex word: bumped to wake sleepers
  std::atomic<bool> stop_{false};
  static inline thread_local bool t_worker_ __attribute__((tls_model("initial-exec"))) = false;
};

// Waits politely: spins with a pause instruction, then yields, then sleeps in short naps, so a
// busy-waiting issuer does not starve workers on machines with few cores.
class Backoff {
 public:
  void pause();
  void reset() { rounds_ = 0; }

 private:
  unsigned rounds_ = 0;
};

}  // namespace cmt
