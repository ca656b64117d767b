// The worker pool with several queues: jobs issued from different threads at once all run to the
// end, every unit exactly once, and no queue has more threads on its units than it allows.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/shared/cpu_contention.h"
#include "engine/shared/worker_pool.h"

namespace cmt {
namespace {

// For the tests of how threads spin: a machine whose CPUs are never all taken (no loadavg file),
// so that a loaded test machine (2 cores, ctest -j2) does not send the spinners to sleep.
CpuContention& never_contended() {
  static CpuContention never("");
  return never;
}

// Counts each unit's runs and the most threads inside this job at once.
class CountingTask final : public UnitTask {
 public:
  explicit CountingTask(std::size_t units) : runs_(units) {}
  void run_unit(std::size_t i) override {
    const int now = inside_.fetch_add(1) + 1;
    int seen = most_.load();
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {
    }
    runs_[i].fetch_add(1);
    for (volatile int spin = 0; spin < 20000; ++spin) {
    }
    inside_.fetch_sub(1);
  }
  bool each_ran_once() const {
    for (const auto& r : runs_)
      if (r.load() != 1) return false;
    return true;
  }
  int most_at_once() const { return most_.load(); }

 private:
  std::vector<std::atomic<int>> runs_;
  std::atomic<int> inside_{0}, most_{0};
};

// One job on `q`: units published a few at a time, as the engine does, the issuer helping.
void run_job(WorkQueue& q, CountingTask& task, std::size_t units) {
  q.begin(&task);
  for (std::size_t published = 0; published < units;) {
    published = std::min(units, published + 7);
    q.publish(published);
    q.help();
  }
  while (q.finished() < units) q.help();
  q.end();
}

TEST(WorkerPool, QueuesRunAtOnceWithinTheirLimits) {
  WorkerPool pool(6, {}, std::chrono::microseconds(200));
  std::vector<WorkQueue*> queues;
  for (unsigned limit : {3u, 3u, 2u, 5u}) queues.push_back(pool.add_queue(limit));
  for (WorkQueue* q : queues) ASSERT_NE(q, nullptr);
  std::atomic<int> wrong{0};
  std::vector<std::thread> issuers;
  for (std::size_t i = 0; i < queues.size(); ++i)
    issuers.emplace_back([&, i] {
      for (int job = 0; job < 20; ++job) {
        const std::size_t units = 50 + 13 * i + job;
        CountingTask task(units);
        run_job(*queues[i], task, units);
        if (!task.each_ran_once()) ++wrong;
        // The queue's share of the pool's threads, and its issuer.
        if (task.most_at_once() > static_cast<int>(queues[i]->threads()) + 1) ++wrong;
      }
    });
  for (auto& t : issuers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// The pool workers of this process (by their thread name) that are running or runnable now.
int runnable_workers() {
  int n = 0;
  const std::string name = std::string("(") + WorkerPool::kThreadName + ") R";
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      char path[300], buf[512];
      std::snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
      FILE* f = std::fopen(path, "r");
      if (!f) continue;
      const std::size_t len = std::fread(buf, 1, sizeof(buf) - 1, f);
      std::fclose(f);
      buf[len] = 0;
      if (std::strstr(buf, name.c_str())) ++n;  // "TID (comm) STATE ..."
    }
    closedir(d);
  }
  return n;
}

// A job published a unit at a time, as the engine publishes pieces: the pool's threads past the
// queue's limit are not woken by each publication to spin beside those at work, but sleep.
TEST(WorkerPool, ThreadsPastAQueuesLimitSleepThroughItsJob) {
  WorkerPool pool(6, {}, std::chrono::microseconds(300), FaultSignals::Blocked, true,
                  &never_contended());
  WorkQueue* q = pool.add_queue(2);
  ASSERT_NE(q, nullptr);
  class Spin final : public UnitTask {
   public:
    void run_unit(std::size_t) override {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
  } task;
  std::atomic<bool> done{false};
  std::vector<int> samples;
  std::thread sampler([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    while (!done.load()) {
      samples.push_back(runnable_workers());
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  const std::size_t units = 1500;
  q->begin(&task);
  for (std::size_t i = 1; i <= units; ++i) {
    q->publish(i);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  while (q->finished() < units) q->help();
  q->end();
  done = true;
  sampler.join();
  ASSERT_GT(samples.size(), 10u);
  std::sort(samples.begin(), samples.end());
  // The queue's two workers, and now and then one or two woken into a moment's room, spinning a
  // while before they sleep again (on a loaded 2-core machine the median was 3 or 4); the pool's
  // other threads woken by every publication would make five or six.
  EXPECT_LE(samples[samples.size() / 2], 4) << "the pool's other threads spun through the job";
}

// A pool grown for three jobs at once, then running one at a time (as the engine's pool, grown
// when two copies overlapped, serves a model loader's copies one after another): only that job's
// threads stay awake, during the job and in the spin after it. Before, every thread woken once
// spun through each job and its gap, beside the program's threads.
TEST(WorkerPool, AGrownPoolKeepsAwakeOnlyTheThreadsItsJobsUse) {
  WorkerPool pool(2, {}, std::chrono::milliseconds(30), FaultSignals::Blocked, true,
                  &never_contended());
  pool.grow(6);
  ASSERT_EQ(pool.size(), 6u);
  std::vector<WorkQueue*> queues;
  for (int i = 0; i < 3; ++i) queues.push_back(pool.add_queue(2));
  for (WorkQueue* q : queues) ASSERT_NE(q, nullptr);
  {  // three jobs at once wake every thread
    std::vector<std::thread> issuers;
    for (WorkQueue* q : queues)
      issuers.emplace_back([q] {
        CountingTask task(400);
        run_job(*q, task, 400);
      });
    for (auto& t : issuers) t.join();
  }
  // Then jobs one after another on one queue, each woken ahead as the engine wakes a copy's
  // threads, with a short gap between them.
  WorkQueue& q = *queues[0];
  std::vector<unsigned> during;
  for (int job = 0; job < 150; ++job) {
    q.wake();
    CountingTask task(40);
    run_job(q, task, 40);
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    if (job >= 20) during.push_back(pool.awake());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(8));  // well inside the 30 ms spin
  const unsigned after = pool.awake();
  std::sort(during.begin(), during.end());
  // The job's two threads (a third now and then, woken into a moment's room, on its way back to
  // sleep); a grown pool whose threads each job woke would keep all six spinning.
  EXPECT_LE(during[during.size() / 2], 3u) << "a grown pool kept its threads awake beside one job";
  EXPECT_LE(after, 2u) << "more threads spun after the jobs than the pool started with";
  CountingTask again(300);  // and the sleepers still come when there is work
  run_job(q, again, 300);
  EXPECT_TRUE(again.each_ran_once());
}

// The gaps between jobs on a clock of their own (JobGaps): 1 ms of spin.
constexpr std::int64_t kMs = 1'000'000;  // ns

// One job from `begin` to `end` (ns).
void job(JobGaps& gaps, std::int64_t begin, std::int64_t end) {
  gaps.began(begin);
  gaps.ended(end);
}

TEST(JobGaps, GapsShorterThanTheSpinKeepIt) {
  JobGaps gaps(1 * kMs);
  std::int64_t t = 100 * kMs;
  for (int i = 0; i < 10; ++i, t += kMs / 2) job(gaps, t, t + kMs / 10);  // 0.4 ms apart
  EXPECT_EQ(gaps.expected_gap_ns(), 0);
  const std::int64_t end = t - kMs / 2 + kMs / 10;
  EXPECT_EQ(gaps.idle(end + kMs / 2, end).kind, JobGaps::Choice::Spin);
  EXPECT_EQ(gaps.idle(end + 2 * kMs, end).kind, JobGaps::Choice::Sleep);
}

TEST(JobGaps, TwoLongGapsNapTillTheNextIsDue) {
  JobGaps gaps(1 * kMs);
  job(gaps, 0, kMs / 2);
  job(gaps, 3 * kMs, 3 * kMs + kMs / 2);  // a gap of 2.5 ms
  EXPECT_EQ(gaps.expected_gap_ns(), 0) << "one long gap is no pattern";
  job(gaps, 6 * kMs, 6 * kMs + kMs / 2);  // 2.5 ms again
  EXPECT_EQ(gaps.expected_gap_ns(), 5 * kMs / 2);
  const std::int64_t end = 6 * kMs + kMs / 2, due = end + 5 * kMs / 2;
  // Past the bridge after the job: a nap until the lead (a quarter of the spin at most) before
  // it is due.
  EXPECT_EQ(gaps.idle(end + 10'000, end).kind, JobGaps::Choice::Spin) << "within the bridge";
  const std::int64_t t = end + JobGaps::kBridge + 10'000;
  const JobGaps::Choice c = gaps.idle(t, end);
  EXPECT_EQ(c.kind, JobGaps::Choice::Nap);
  EXPECT_EQ(t + c.nap_ns, due - std::max(JobGaps::kMinLead, gaps.expected_gap_ns() / 16));
  EXPECT_EQ(gaps.idle(due - 100'000, end).kind, JobGaps::Choice::Spin) << "awake ahead of it";
  EXPECT_EQ(gaps.idle(due + 100'000, end).kind, JobGaps::Choice::Spin) << "and a little after";
  EXPECT_EQ(gaps.idle(due + kMs, end).kind, JobGaps::Choice::Sleep) << "the guess missed";
  // While a job runs, its idle threads spin as before.
  gaps.began(due);
  EXPECT_EQ(gaps.idle(due + kMs / 2, due).kind, JobGaps::Choice::Spin);
  EXPECT_EQ(gaps.idle(due + 2 * kMs, due).kind, JobGaps::Choice::Sleep);
  gaps.ended(due + kMs / 2);
  // The shorter of the last two gaps is the guess; one gap within the spin drops it.
  job(gaps, due + 4 * kMs, due + 4 * kMs + kMs / 2);
  EXPECT_EQ(gaps.expected_gap_ns(), 5 * kMs / 2);
  job(gaps, due + 5 * kMs, due + 5 * kMs + kMs / 2);
  EXPECT_EQ(gaps.expected_gap_ns(), 0);
}

TEST(JobGaps, ACopysOwnJobsTeachNothing) {
  JobGaps gaps(1 * kMs);
  std::int64_t t = 0;
  for (int i = 0; i < 3; ++i, t += 3 * kMs) job(gaps, t, t + kMs / 2);
  ASSERT_GT(gaps.expected_gap_ns(), 0);
  // A device-to-host copy into fresh memory ends one job (populating) as it begins the next.
  job(gaps, t, t + kMs / 4);
  job(gaps, t + kMs / 4 + 10'000, t + kMs / 2);
  EXPECT_GT(gaps.expected_gap_ns(), 0);
  // Jobs of several queues at once: the gap is from the last one's end.
  gaps.began(t + 3 * kMs);
  gaps.began(t + 3 * kMs + 1000);
  gaps.ended(t + 3 * kMs + kMs / 2);
  EXPECT_EQ(gaps.idle(t + 4 * kMs, t + 3 * kMs + kMs / 2).kind, JobGaps::Choice::Spin);
  gaps.ended(t + 4 * kMs);
  EXPECT_EQ(gaps.idle(t + 4 * kMs + JobGaps::kBridge + 10'000, t + 4 * kMs).kind,
            JobGaps::Choice::Nap);
}

// A guess made before a burst of copies from several threads: each copy hands its lane to the
// next within tens of microseconds, and the threads must spin through those hand-overs.
TEST(JobGaps, AGuessDoesNotSendThreadsToSleepBetweenCopiesHandingOverALane) {
  JobGaps gaps(1 * kMs);
  std::int64_t t = 0;
  for (int i = 0; i < 3; ++i, t += 3 * kMs) job(gaps, t, t + kMs / 2);
  ASSERT_GT(gaps.expected_gap_ns(), 0);
  for (int i = 0; i < 20; ++i, t += kMs / 2 + 40'000) {
    job(gaps, t, t + kMs / 2);
    EXPECT_EQ(gaps.idle(t + kMs / 2 + 30'000, t + kMs / 2).kind, JobGaps::Choice::Spin) << i;
  }
}

TEST(JobGaps, WithoutWakeAheadThreadsSpinAndSleepAsBefore) {
  JobGaps gaps(1 * kMs, /*wake_ahead=*/false);
  std::int64_t t = 0;
  for (int i = 0; i < 5; ++i, t += 3 * kMs) job(gaps, t, t + kMs / 2);
  EXPECT_EQ(gaps.expected_gap_ns(), 0);
  const std::int64_t end = t - 3 * kMs + kMs / 2;
  EXPECT_EQ(gaps.idle(end + kMs / 2, end).kind, JobGaps::Choice::Spin);
  EXPECT_EQ(gaps.idle(end + 2 * kMs, end).kind, JobGaps::Choice::Sleep);
}

TEST(JobGaps, ThreadsThatNeverSpinNeverNap) {
  JobGaps gaps(0);
  std::int64_t t = 0;
  for (int i = 0; i < 5; ++i, t += 3 * kMs) job(gaps, t, t + kMs / 2);
  EXPECT_EQ(gaps.expected_gap_ns(), 0);
  EXPECT_EQ(gaps.idle(t, t).kind, JobGaps::Choice::Sleep);
}

// Units that take a while, so that the pool's threads share a job with its issuer.
class SlowUnits final : public UnitTask {
 public:
  void run_unit(std::size_t) override {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
};

void run_slow_job(WorkQueue& q) {
  SlowUnits task;
  q.wake();
  q.begin(&task);
  q.publish(8);
  while (q.finished() < 8) q.help();
  q.end();
}

// Jobs far apart, as a loop with work between its copies makes them: the threads do not spin
// through the gaps (before, each spun its whole spin in every gap), and a timer wakes them ahead
// of the next job. (Counted rather than timed: on a loaded machine a timer may ring late.)
TEST(WorkerPool, ThreadsNapThroughLongGapsAndATimerWakesThemAhead) {
  WorkerPool pool(2, {}, std::chrono::milliseconds(4), FaultSignals::Blocked, true,
                  &never_contended());
  WorkQueue& q = pool.queue();
  const int jobs = 30, warmup = 5;
  double cpu_after_warmup = 0;
  unsigned timer_wakes_after_warmup = 0;
  for (int i = 0; i < jobs; ++i) {
    if (i == warmup) {
      cpu_after_warmup = pool.cpu_seconds();
      timer_wakes_after_warmup = pool.timer_wakes();
    }
    run_slow_job(q);
    std::this_thread::sleep_for(std::chrono::milliseconds(24));
  }
  const double per_gap = (pool.cpu_seconds() - cpu_after_warmup) / (jobs - warmup);
  EXPECT_TRUE(pool.sleeps_between_jobs());
  // Spinning through each gap would cost 2 threads x 4 ms; waking a lead (1 ms) ahead, 2 x 1 ms
  // and the jobs' own work.
  EXPECT_LT(per_gap, 0.5 * 2 * 0.004) << "the threads spun through the gaps";
  // Two threads a gap; on a loaded 2-core machine a late wake-up of the test's own thread (up to
  // milliseconds) lets a job come first now and then.
  EXPECT_GE(pool.timer_wakes() - timer_wakes_after_warmup,
            static_cast<unsigned>(jobs - warmup) / 2)
      << "no timer woke the threads ahead of the jobs";
}

// The same on real threads: after gaps long enough to make a guess, jobs 30 us apart (a lane
// handed from copy to copy) do not send the threads to sleep between them.
TEST(WorkerPool, ThreadsStayAwakeThroughHandOversAfterLongGaps) {
  WorkerPool pool(2, {}, std::chrono::milliseconds(4), FaultSignals::Blocked, true,
                  &never_contended());
  WorkQueue& q = pool.queue();
  for (int i = 0; i < 4; ++i) {
    run_slow_job(q);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(pool.sleeps_between_jobs());
  const unsigned before = pool.sleeps();
  const int jobs = 200;
  for (int i = 0; i < jobs; ++i) {
    run_slow_job(q);
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(30);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  // Both threads napping at each hand-over would make two sleeps a job; a stretched hand-over on
  // a loaded machine ends the guess, and threads spinning then sleep only after 4 ms without work.
  EXPECT_LT(pool.sleeps() - before, static_cast<unsigned>(jobs / 4))
      << "the threads slept between jobs handed over back to back";
}

TEST(WorkerPool, TheFirstQueueTakesEveryThreadAndQueuesRunOut) {
  WorkerPool pool(2, {});
  EXPECT_GT(pool.queue().threads(), 2u);
  CountingTask task(100);
  run_job(pool.queue(), task, 100);
  EXPECT_TRUE(task.each_ran_once());
  while (pool.add_queue(1)) {
  }
  CountingTask more(10);
  run_job(pool.queue(), more, 10);  // still served once every slot is taken
  EXPECT_TRUE(more.each_ran_once());
}

// A loadavg file of the tests' own, holding `runnable` runnable threads.
struct LoadavgFile {
  std::string path;
  explicit LoadavgFile(unsigned runnable) {
    char name[] = "/tmp/cmt-loadavg-XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    close(fd);
    path = name;
    set(runnable);
  }
  ~LoadavgFile() { unlink(path.c_str()); }
  void set(unsigned runnable) {
    std::ofstream(path) << "0.52 0.58 0.59 " << runnable << "/1234 5678\n";
  }
};

TEST(CpuContention, ReadsTheRunnableThreadsOfALoadavgLine) {
  unsigned n = 0;
  const std::string good = "0.52 0.58 0.59 17/1234 5678\n";
  ASSERT_TRUE(CpuContention::parse_runnable(good.data(), good.size(), &n));
  EXPECT_EQ(n, 17u);
  for (const std::string bad : {"", "0.52 0.58 0.59", "0.52 0.58 0.59 ", "0.52 0.58 0.59 x/12",
                                "0.52 0.58 0.59 12", "0.52 0.58 0.59 /12", "0.52 0.58 17/12 3"})
    EXPECT_FALSE(CpuContention::parse_runnable(bad.data(), bad.size(), &n)) << "'" << bad << "'";
}

TEST(CpuContention, TakenWhenMoreThreadsAreRunnableThanThereAreCpus) {
  LoadavgFile file(17);
  CpuContention c(file.path, 16);
  const std::int64_t t = 1'000'000'000;
  EXPECT_TRUE(c.contended(t));
  file.set(16);
  // The answer is held for the refresh, then read again.
  EXPECT_TRUE(c.contended(t + CpuContention::kRefreshNs / 2));
  EXPECT_FALSE(c.contended(t + CpuContention::kRefreshNs));
  EXPECT_EQ(c.reads(), 2u);
  EXPECT_EQ(c.contended_reads(), 1u);
}

TEST(CpuContention, AFileThatCannotBeReadOrIsNoLoadavgNeverSaysTaken) {
  CpuContention missing("/nonexistent/loadavg", 1);
  EXPECT_FALSE(missing.contended(1));
  LoadavgFile file(0);
  std::ofstream(file.path) << "not a loadavg line\n";
  CpuContention malformed(file.path, 1);
  EXPECT_FALSE(malformed.contended(1));
  EXPECT_EQ(malformed.reads(), 0u);
}

TEST(CpuContention, TheMachinesCountsItsOnlineCpus) {
  CpuContention& m = CpuContention::machine();
  EXPECT_EQ(m.cpus(), static_cast<unsigned>(get_nprocs()));
  m.contended(steady_now_ns());  // reads /proc/loadavg (unless a pool just did), whatever it says
  if (access("/proc/loadavg", R_OK) == 0) {
    EXPECT_GE(m.reads(), 1u);
  }
}

// While every CPU is taken the pool's idle threads sleep instead of spinning (a 10 s spin would
// keep them awake), and the next job's publications still wake them; where CPUs are free they
// spin as before.
TEST(WorkerPool, IdleThreadsSleepInsteadOfSpinningWhileEveryCpuIsTaken) {
  LoadavgFile busy(64);
  CpuContention taken(busy.path, 16);
  WorkerPool pool(4, {}, std::chrono::seconds(10), FaultSignals::Blocked, false, &taken);
  WorkerPool free_pool(4, {}, std::chrono::seconds(10), FaultSignals::Blocked, false,
                       &never_contended());
  for (int job = 0; job < 3; ++job) {
    CountingTask task(300), other(300);
    run_job(pool.queue(), task, 300);
    run_job(free_pool.queue(), other, 300);
    EXPECT_TRUE(task.each_ran_once());
    EXPECT_TRUE(other.each_ran_once());
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (pool.awake() > 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(pool.awake(), 0u) << "idle threads spun on with every CPU taken";
    EXPECT_EQ(free_pool.awake(), 4u) << "idle threads slept within their spin with CPUs free";
  }
  EXPECT_GE(pool.contended_sleeps(), 1u);
  EXPECT_EQ(free_pool.contended_sleeps(), 0u);
  // What the engine tells the warm gate: no thread of the first pool spins after a copy.
  EXPECT_TRUE(pool.cpus_taken());
  EXPECT_FALSE(free_pool.cpus_taken());
}

}  // namespace
}  // namespace cmt
