#include "engine/shared/worker_pool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include <chrono>

#include "common/steady_clock.h"
#include "common/thread_context.h"
#include "engine/shared/gpu_locality.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CMT_CPU_RELAX() _mm_pause()
#else
#define CMT_CPU_RELAX() std::atomic_signal_fence(std::memory_order_seq_cst)
#endif

namespace cmt {
namespace {

// Sleeping on a bare futex rather than a condition variable: waking all workers then costs one
// system call, with no herd queuing on a mutex afterwards. Sleeps until woken, or for at most
// `nap_ns` if positive; returns whether such a nap ran out.
bool futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::int64_t nap_ns = 0) {
  timespec nap{static_cast<time_t>(nap_ns / 1'000'000'000),
               static_cast<long>(nap_ns % 1'000'000'000)};
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected,
                 nap_ns > 0 ? &nap : nullptr, nullptr, 0) != 0 &&
         errno == ETIMEDOUT;
}

void futex_wake(std::atomic<std::uint32_t>* word, unsigned most) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE_PRIVATE,
          static_cast<int>(std::min<unsigned>(most, INT_MAX)), nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>* word) {
  futex_wake(word, INT_MAX);
}

}  // namespace

void JobGaps::began(std::int64_t now) {
  if (running_.fetch_add(1, std::memory_order_relaxed) != 0) return;
  const std::int64_t from = idle_from_ns_.load(std::memory_order_relaxed);
  if (from == kNever || now - from < kBridge) return;
  const std::int64_t gap = now - from;
  const std::int64_t previous = last_gap_ns_.exchange(gap, std::memory_order_relaxed);
  const bool long_gaps = wake_ahead_ && spin_ns_ > 0 && gap > spin_ns_ && previous > spin_ns_;
  expected_gap_ns_.store(long_gaps ? std::min(gap, previous) : 0, std::memory_order_relaxed);
}

void JobGaps::ended(std::int64_t now) {
  if (running_.fetch_sub(1, std::memory_order_relaxed) == 1)
    idle_from_ns_.store(now, std::memory_order_relaxed);
}

JobGaps::Choice JobGaps::idle(std::int64_t now, std::int64_t idle_since) const {
  const std::int64_t gap = expected_gap_ns();
  if (gap == 0 || running_.load(std::memory_order_relaxed) > 0)
    return {now - idle_since < spin_ns_ ? Choice::Spin : Choice::Sleep, 0};
  const std::int64_t from = idle_from_ns_.load(std::memory_order_relaxed);
  if (now - from < std::min(kBridge, spin_ns_)) return {Choice::Spin, 0};
  // The lead grows with the gap (a long gap varies more), within a quarter of the spin.
  const std::int64_t lead = std::min(spin_ns_ / 4, std::max(kMinLead, gap / 16));
  const std::int64_t due = from + gap;
  if (now < due - lead - kMinNap) return {Choice::Nap, due - lead - now};
  if (now < due + lead) return {Choice::Spin, 0};
  return {Choice::Sleep, 0};  // the guess missed: whatever comes wakes them
}

void Backoff::pause() {
  // A nap costs at least the kernel's timer slack (~50 us), longer than a DMA of a piece, so the
  // issuer naps only after a long wait; yielding first lets workers run on small machines.
  ++rounds_;
  if (rounds_ < 2048) {
    CMT_CPU_RELAX();
  } else if (rounds_ < 32768) {
    sched_yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

WorkerPool::WorkerPool(unsigned threads, const std::vector<int>& cpus,
                       std::chrono::microseconds idle_spin, FaultSignals faults, bool wake_ahead,
                       CpuContention* contention)
    : gaps_(std::chrono::duration_cast<std::chrono::nanoseconds>(idle_spin).count(), wake_ahead),
      contention_(contention ? *contention : CpuContention::machine()),
      base_threads_(std::max(1u, threads)),
      cpus_(cpus),
      faults_(faults) {
  add_queue();  // queue(): every thread
  std::lock_guard<std::mutex> lk(add_mu_);
  try {
    start_threads(threads);
  } catch (...) {
    stop_.store(true);
    wake_seq_.fetch_add(1);
    futex_wake_all(&wake_seq_);
    for (auto& t : threads_) t.join();
    throw;
  }
}

void WorkerPool::grow(unsigned threads) {
  std::lock_guard<std::mutex> lk(add_mu_);
  start_threads(threads);
}

void WorkerPool::start_threads(unsigned threads) {
  // Workers inherit the creator's signal mask: block everything while creating them.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  try {
    for (unsigned i = static_cast<unsigned>(threads_.size()); i < threads; ++i) {
      threads_.emplace_back([this, i] {
        pthread_setname_np(pthread_self(), kThreadName);  // what top -H and debuggers show
        pin_current_thread(cpus_);
        t_thread.copy_thread = true;
        if (faults_ == FaultSignals::Delivered) {
          sigset_t faults;
          sigemptyset(&faults);
          sigaddset(&faults, SIGSEGV);
          sigaddset(&faults, SIGBUS);
          pthread_sigmask(SIG_UNBLOCK, &faults, nullptr);
        }
        worker_main(i);
      });
      size_.store(i + 1, std::memory_order_release);
    }
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

WorkerPool::~WorkerPool() {
  stop_.store(true);
  wake_seq_.fetch_add(1);
  futex_wake_all(&wake_seq_);
  for (auto& t : threads_) t.join();
}

WorkQueue* WorkerPool::add_queue(unsigned limit) {
  std::lock_guard<std::mutex> lk(add_mu_);
  const unsigned n = queue_count_.load(std::memory_order_relaxed);
  if (n >= kMaxQueues) return nullptr;
  queues_[n].reset(new WorkQueue(*this, limit ? limit : ~0u));
  queue_count_.store(n + 1, std::memory_order_release);
  return queues_[n].get();
}

void WorkerPool::wake(unsigned most) {
  // Idle workers take the new work as they are; a sleeper woken beside them would find none.
  // Should one of them fall asleep instead, it looks for work first (worker_main), and the
  // issuer runs whatever no worker takes.
  const int idle = std::max(0, idle_.load(std::memory_order_seq_cst));
  if (most <= static_cast<unsigned>(idle)) return;
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    wake_seq_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&wake_seq_, most - static_cast<unsigned>(idle));
  }
}

unsigned WorkerPool::awake() const {
  const unsigned n = size();
  const unsigned asleep =
      static_cast<unsigned>(std::max(0, sleepers_.load(std::memory_order_acquire)));
  return n - std::min(n, asleep);
}

double WorkerPool::cpu_seconds() {
  std::lock_guard<std::mutex> lk(add_mu_);
  double total = 0;
  for (std::thread& t : threads_) {
    clockid_t clock;
    timespec ts;
    if (pthread_getcpuclockid(t.native_handle(), &clock) == 0 && clock_gettime(clock, &ts) == 0)
      total += static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  }
  return total;
}

unsigned WorkerPool::awake_cap() const {
  const unsigned threads = size();
  unsigned demand = 0;
  const unsigned n = queue_count_.load(std::memory_order_acquire);
  for (unsigned i = 0; i < n; ++i)
    if (queues_[i]->task_.load(std::memory_order_acquire) != nullptr)
      demand += std::min(queues_[i]->limit_, threads);
  return std::min(threads, std::max(base_threads_, demand));
}

bool WorkerPool::claim_early_sleep() {
  const int cap = static_cast<int>(awake_cap());
  const int threads = static_cast<int>(size());
  int asleep = sleepers_.load(std::memory_order_seq_cst);
  while (threads - asleep > cap)
    if (sleepers_.compare_exchange_weak(asleep, asleep + 1, std::memory_order_seq_cst)) return true;
  return false;
}

bool WorkerPool::has_claimable() const {
  const unsigned n = queue_count_.load(std::memory_order_acquire);
  for (unsigned i = 0; i < n; ++i)
    if (queues_[i]->has_claimable()) return true;
  return false;
}

unsigned WorkQueue::room() const {
  const unsigned working = working_.load(std::memory_order_seq_cst);
  return working < limit_ ? limit_ - working : 0;
}

void WorkQueue::wake() {
  pool_.wake(room());
}

void WorkQueue::begin(UnitTask* task) {
  published_.store(0, std::memory_order_relaxed);
  claimed_.store(0, std::memory_order_relaxed);
  finished_.store(0, std::memory_order_relaxed);
  pool_.gaps_.began(steady_now_ns());
  task_.store(task, std::memory_order_release);
}

void WorkQueue::publish(std::size_t limit) {
  published_.store(limit, std::memory_order_seq_cst);
  pool_.wake(room());
}

void WorkQueue::end() {
  Backoff backoff;
  // Every published unit is finished before the task is withdrawn; the issuer runs those not yet
  // claimed itself. At the end of a copy they are the last piece's, which nothing overlaps: in a
  // copy of a few pieces that is most of its time, and workers still waking would leave them.
  while (finished_.load(std::memory_order_acquire) < published_.load(std::memory_order_acquire))
    if (try_run_one(true))
      backoff.reset();
    else
      backoff.pause();
  task_.store(nullptr, std::memory_order_seq_cst);
  // ...and no worker may still be looking at it when the caller destroys it.
  backoff.reset();
  while (inside_.load(std::memory_order_seq_cst) != 0) backoff.pause();
  pool_.gaps_.ended(steady_now_ns());
}

bool WorkQueue::has_claimable() const {
  // Work a sleeping worker could take: units left, and room under the limit.
  return task_.load(std::memory_order_seq_cst) != nullptr &&
         claimed_.load(std::memory_order_seq_cst) < published_.load(std::memory_order_seq_cst) &&
         working_.load(std::memory_order_seq_cst) < limit_;
}

bool WorkQueue::try_run_one(bool issuer) {
  // Read-only look first, so idle workers spin on shared cache lines instead of writing them.
  if (claimed_.load(std::memory_order_relaxed) >= published_.load(std::memory_order_acquire))
    return false;
  // Past the queue's share of the pool's threads, a worker leaves its units to those already on
  // it. Looked at before written: the pool's other idle threads poll here, and writes from all of
  // them would slow the threads at work on this line.
  if (!issuer) {
    if (working_.load(std::memory_order_relaxed) >= limit_) return false;
    if (working_.fetch_add(1, std::memory_order_seq_cst) >= limit_) {
      working_.fetch_sub(1, std::memory_order_seq_cst);
      return false;
    }
  }
  inside_.fetch_add(1, std::memory_order_seq_cst);
  bool ran = false;
  if (UnitTask* task = task_.load(std::memory_order_seq_cst)) {
    std::size_t c = claimed_.load(std::memory_order_acquire);
    while (c < published_.load(std::memory_order_acquire)) {
      if (claimed_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) {
        task->run_unit(c);
        finished_.fetch_add(1, std::memory_order_acq_rel);
        ran = true;
        break;
      }
    }
  }
  inside_.fetch_sub(1, std::memory_order_seq_cst);
  if (!issuer) working_.fetch_sub(1, std::memory_order_seq_cst);
  return ran;
}

void WorkerPool::worker_main(unsigned index) {
  std::int64_t idle_since = 0;
  unsigned spins = 0;     // turns without work since the last unit (0: not idle)
  unsigned next = index;  // where this worker looks first: the queues are taken in turn
  while (!stop_.load(std::memory_order_acquire)) {
    const unsigned n = queue_count_.load(std::memory_order_acquire);
    bool ran = false;
    for (unsigned i = 0; i < n && !ran; ++i) {
      const unsigned q = (next + i) % n;
      if (queues_[q]->try_run_one()) {
        ran = true;
        next = q + 1;  // another queue's unit next, so no copy starves the others
      }
    }
    if (ran) {
      if (spins > 0) idle_.fetch_sub(1, std::memory_order_seq_cst);
      spins = 0;
      continue;
    }
    if (spins++ == 0) {
      idle_since = steady_now_ns();
      idle_.fetch_add(1, std::memory_order_seq_cst);
    }
    if ((spins & 63) != 0) {
      CMT_CPU_RELAX();
      continue;
    }
    // Every 64 turns: sleep at once if more workers are awake than the jobs running now can use,
    // else as the gaps between jobs say (JobGaps: once the spin is over, or a nap till the next),
    // and instead of spinning on while every CPU is taken (a publish wakes the sleeper).
    const bool counted = claim_early_sleep();
    JobGaps::Choice choice{JobGaps::Choice::Sleep, 0};
    if (!counted) {
      const std::int64_t now = steady_now_ns();
      choice = gaps_.idle(now, idle_since);
      if (choice.kind == JobGaps::Choice::Spin) {
        if (!contention_.contended(now)) {
          CMT_CPU_RELAX();
          continue;
        }
        choice = {JobGaps::Choice::Sleep, 0};
        contended_sleeps_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    idle_.fetch_sub(1, std::memory_order_seq_cst);
    // Announce the sleep, then re-check: a publisher either sees us in sleepers_ and bumps the
    // futex word (so the wait returns at once), or we see its work here.
    if (!counted) sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t seq = wake_seq_.load(std::memory_order_seq_cst);
    if (!stop_.load() && !has_claimable()) {
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      if (futex_wait(&wake_seq_, seq, choice.kind == JobGaps::Choice::Nap ? choice.nap_ns : 0))
        timer_wakes_.fetch_add(1, std::memory_order_relaxed);
    }
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    spins = 0;
  }
  if (spins > 0) idle_.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace cmt
