// A persistent pool of CPU threads that run the units of jobs: the issuing thread of a job
// publishes unit indices as they become runnable (a staging slot frees up, a DMA lands) and the
// workers claim them in order. A pool serves several job queues at once, in turn. Workers are
// pinned to the GPU's local cores, block every signal (the host application's handlers never run
// on them; a pool whose units run under a fault guard takes SIGSEGV and SIGBUS, which cmt's own
// handler catches: engine/shared/fault_guard.h), spin briefly when idle and then sleep. A pool
// grown past the threads it started with keeps no more of them awake than its running jobs can
// use: the rest sleep, leaving their cores to the program. Where the gaps between its jobs have
// been longer than the spin, the threads sleep at once and a timer wakes them shortly before the
// next job is due (JobGaps). Nor do they spin while every CPU of the machine is taken
// (CpuContention): a spinning thread would hold a core that another thread, of this program or
// of another process, waits for.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/steady_clock.h"
#include "engine/shared/cpu_contention.h"

namespace cmt {

class UnitTask {
 public:
  virtual ~UnitTask() = default;
  virtual void run_unit(std::size_t index) = 0;
};

class WorkerPool;

// When a pool's next job is likely to come, guessed from the gaps between its jobs (the times no
// job of any queue ran). Threads that spin through every gap hold a core each for the whole gap
// when the gaps outlast the spin, and then sleep just before the next job anyway: a model loader
// with 1 ms of work between its copies spent 0.86 CPU s/GB on an H100 machine, and 0.37 at the
// same speed with the naps below (lab/NOTES.md 72).
// Once the last two gaps both outlasted the spin, an idle thread naps instead until a lead before
// the shorter of the two has passed, spins from there to as long after it, and sleeps for good if
// no job came. Gaps shorter than the spin (copies back to back) keep the spin. Whatever the guess,
// the threads spin for kBridge after the last job ends: a copy's own jobs (populating a fresh
// destination, then draining into it) and a copy handing its lane to the next come within it, so
// gaps under it teach nothing. Lock-free and approximate: jobs racing to begin only blur one
// guess. Times are steady-clock nanoseconds, passed in so that tests drive it on a clock of their
// own.
class JobGaps {
 public:
  // Without it, a guess made before a burst of copies from several threads lasted through it (the
  // lanes' hand-overs are gaps of tens of microseconds, too short to teach anything) and sent the
  // threads to sleep at every hand-over: 8 Python threads copying a model's tensors ran 0.93-1.03
  // of the build before, below it in 5 rounds of 6 (H100, lab/NOTES.md 72).
  static constexpr std::int64_t kBridge = 100'000;  // ns
  // A nap shorter than this is not worth a timer: spin instead.
  static constexpr std::int64_t kMinNap = 50'000;
  // The least a thread wakes ahead of a job: three times the kernel's default timer slack (50 us),
  // for a VM's wake-up on top (a guess; how late the timers ring there was not measured).
  static constexpr std::int64_t kMinLead = 150'000;

  // `wake_ahead` false: no guess is ever made, and the threads spin `spin_ns` after every job.
  explicit JobGaps(std::int64_t spin_ns, bool wake_ahead = true)
      : spin_ns_(spin_ns), wake_ahead_(wake_ahead) {}
  void began(std::int64_t now_ns);
  void ended(std::int64_t now_ns);

  struct Choice {
    enum Kind { Spin, Nap, Sleep } kind;
    std::int64_t nap_ns;  // Nap: for how long
  };
  // What a worker idle since `idle_since_ns` does at `now_ns`: spin on, nap (a sleep any wake-up
  // ends early), or sleep until woken.
  Choice idle(std::int64_t now_ns, std::int64_t idle_since_ns) const;
  // The gap the next job is expected after (0: none, the threads spin through gaps).
  std::int64_t expected_gap_ns() const { return expected_gap_ns_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::int64_t kNever = INT64_MIN / 4;
  const std::int64_t spin_ns_;
  const bool wake_ahead_;
  std::atomic<int> running_{0};
  std::atomic<std::int64_t> idle_from_ns_{kNever};  // when the last running job ended
  std::atomic<std::int64_t> last_gap_ns_{0};
  std::atomic<std::int64_t> expected_gap_ns_{0};
};

// One job at a time, its units run by the threads of the pool that made the queue. Several
// queues share one pool: the copies of different threads and directions to one GPU each have a
// queue, and the pool's threads take units from all of them in turn, so concurrent copies share
// the cores instead of each bringing threads of its own.
class WorkQueue {
 public:
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // At most this many of the pool's threads run this queue's units at once; the issuer, helping,
  // comes on top (it is never kept out: it must stay free to issue the next DMA).
  unsigned threads() const { return limit_; }

  // Wakes as many of the pool's sleeping workers as may work on this queue, ahead of a job, so
  // they are spinning by the time work is published (waking a sleeping core can take tens of
  // microseconds, in a VM more). Workers past the queue's limit sleep on: woken, they would only
  // spin beside those at work.
  void wake();

  // Begins a job; units [0, limit) become claimable as publish(limit) raises the limit.
  void begin(UnitTask* task);
  void publish(std::size_t limit);
  // Units finished so far (in any order); the issuer reads it to know when all are done.
  std::size_t finished() const { return finished_.load(std::memory_order_acquire); }
  // Runs one claimable unit on the calling thread, if there is one, so an issuer with nothing
  // to issue helps instead of spinning. Returns whether it ran a unit.
  bool help() { return try_run_one(true); }
  // Waits until every published unit has run, running unclaimed ones itself, and no worker still
  // holds the task.
  void end();

 private:
  friend class WorkerPool;
  WorkQueue(WorkerPool& pool, unsigned limit) : pool_(pool), limit_(limit) {}
  bool try_run_one(bool issuer = false);
  bool has_claimable() const;
  unsigned room() const;  // how many more of the pool's threads may work here now

  WorkerPool& pool_;
  const unsigned limit_;
  // Each counter on its own cache line: idle workers poll published_ while the issuer writes it,
  // and must not slow each other down through a shared line.
  alignas(64) std::atomic<UnitTask*> task_{nullptr};
  alignas(64) std::atomic<std::size_t> published_{0};
  alignas(64) std::atomic<std::size_t> claimed_{0};
  alignas(64) std::atomic<std::size_t> finished_{0};
  alignas(64) std::atomic<unsigned> inside_{0};   // threads that may hold the task pointer now
  alignas(64) std::atomic<unsigned> working_{0};  // of them, the pool's (limited to limit_)
};

// Whether a pool's threads take SIGSEGV and SIGBUS. Blocked, a fault kills the process (the
// kernel's rule); delivered, cmt's handler turns a fault under a guard into a failed unit.
enum class FaultSignals { Blocked, Delivered };

class WorkerPool {
 public:
  // Starts `threads` workers allowed on `cpus` (empty: anywhere); an idle worker spins for
  // `idle_spin` before it sleeps, bridging the gaps between units and between back-to-back
  // copies, and naps through longer gaps if `wake_ahead` (JobGaps); it sleeps instead while
  // `contention` (nullptr: the machine's) says every CPU is taken. Throws std::system_error if
  // a thread cannot start; the caller then forwards.
  WorkerPool(unsigned threads, const std::vector<int>& cpus,
             std::chrono::microseconds idle_spin = std::chrono::microseconds(1000),
             FaultSignals faults = FaultSignals::Blocked, bool wake_ahead = true,
             CpuContention* contention = nullptr);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  unsigned size() const { return size_.load(std::memory_order_acquire); }
  // Starts workers until the pool has `threads` (never fewer than it has). Throws like the
  // constructor; the threads started before a failure stay.
  void grow(unsigned threads);

  // Every worker's thread name, as /proc/PID/task/TID/comm shows it.
  static constexpr const char* kThreadName = "cmt-copy";
  static constexpr unsigned kMaxQueues = 64;
  // A new queue whose jobs this pool's threads run, at most `limit` threads at a time (0: all).
  // It lives as long as the pool. nullptr once kMaxQueues exist.
  WorkQueue* add_queue(unsigned limit = 0);

  // The pool's first queue (every thread), for a user with one job at a time.
  WorkQueue& queue() { return *queues_[0]; }
  // Wakes up to `most` workers (all by default), less those awake with nothing to run, which
  // take the work as they are.
  void wake(unsigned most = ~0u);
  // Workers not asleep now (at work or spinning), for tests and diagnostics.
  unsigned awake() const;
  // For tests and diagnostics too: the times a worker went to sleep, and of them the naps that a
  // timer ended (the worker woke ahead of a job it expected: JobGaps).
  unsigned sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
  unsigned timer_wakes() const { return timer_wakes_.load(std::memory_order_relaxed); }
  // Of the sleeps, those taken instead of a spin because every CPU was taken (CpuContention).
  unsigned contended_sleeps() const { return contended_sleeps_.load(std::memory_order_relaxed); }
  // The CPU time its threads have used so far, at work and spinning, in seconds: what `top`
  // shows of cmt beside the program.
  double cpu_seconds();
  // Whether its idle threads sleep as soon as the jobs end, the gaps between jobs having outlasted
  // their spin (JobGaps): a copy that comes soon after the last will find them asleep.
  bool sleeps_between_jobs() const { return gaps_.expected_gap_ns() > 0; }
  // Whether every CPU of the machine is taken now (CpuContention): idle threads then sleep at once.
  bool cpus_taken() { return contention_.contended(steady_now_ns()); }

 private:
  friend class WorkQueue;
  void worker_main(unsigned index);
  bool has_claimable() const;
  void start_threads(unsigned threads);  // up to `threads` in all; add_mu_ held
  // How many workers may stay awake: the threads the pool started with (one job's worth, for the
  // gap before the next job), or the limits of the queues running a job now, if more. Each job's
  // start used to wake the sleepers of a grown pool, which then spun beside the threads at work:
  // on the 16-core H200 machine, 14 copy threads (a pool grown once for two copies at once) beside
  // a model loader's 8 Python threads copying one tensor at a time reached 19.7 GB/s from a file
  // mapping, and 31.5 with the spares asleep, at 0.28 CPU s/GB against 0.68 (lab/NOTES.md 70).
  unsigned awake_cap() const;
  // An idle worker's early sleep: true (and counted among the sleepers) if more workers are awake
  // than awake_cap().
  bool claim_early_sleep();

  JobGaps gaps_;  // the idle spin, and when the threads nap instead
  CpuContention& contention_;    // whether a spin would hold a core another thread waits for
  const unsigned base_threads_;  // the threads the pool started with
  const std::vector<int> cpus_;
  const FaultSignals faults_;
  std::vector<std::thread> threads_;  // changed under add_mu_ only
  std::atomic<unsigned> size_{0};
  // Set once each, in order; workers read the first queue_count_ of them without a lock.
  std::unique_ptr<WorkQueue> queues_[kMaxQueues];
  std::atomic<unsigned> queue_count_{0};
  std::mutex add_mu_;  // adding queues or threads
  // Written as workers go idle and back, on a line of its own: stop_, below, is read by every
  // spinning worker on every turn.
  alignas(64) std::atomic<int> idle_{0};  // awake workers that found nothing to run, spinning
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<unsigned> sleeps_{0}, timer_wakes_{0};  // counted on the way to sleep only
  std::atomic<unsigned> contended_sleeps_{0};
  std::atomic<std::uint32_t> wake_seq_{0};  // futex word: bumped to wake sleepers
  std::atomic<bool> stop_{false};
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
