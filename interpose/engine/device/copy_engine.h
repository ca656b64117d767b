// The copy engine: moves one pageable-host <-> device copy through a ring of pinned staging
// buffers, with a pool of CPU threads filling (H2D) or draining (D2H) the buffers while the GPU's
// copy engine DMAs the others, every DMA ordered on the caller's stream. It knows nothing of
// symbol names or profiles and reaches CUDA only through a DriverApi table, so tests drive it with
// a fake. It never throws; whatever it could not do is reported as a prefix done, for the caller
// to forward the rest to CUDA. How a copy is cut is engine/device/copy_plan.h; the words are
// defined there.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/copy_types.h"
#include "config/options.h"
#include "cuda/driver_api.h"
#include "engine/device/copy_plan.h"
#include "engine/shared/pinned_budget.h"
#include "engine/shared/staging_ring.h"
#include "engine/shared/worker_pool.h"

namespace cmt {

// What a built lane runs with, for logs and tests.
struct LaneInfo {
  CUcontext ctx;
  Direction direction;
  unsigned threads;       // the most pool threads one copy uses (its issuer helps too)
  unsigned pool_threads;  // the GPU's pool, shared by its lanes, as many threads as it has now
  std::size_t slots, slot_bytes;
  // What building it took, before its first copy could start (that copy waits for it): the
  // whole prepare, and its parts (the ring's memory faulted in and registered; the GPU's copy
  // threads started, 0 where another lane had started them).
  std::int64_t build_ns;
  RingBuildTimes ring_build;
  std::int64_t threads_start_ns;
};

class CopyEngine {
 public:
  // Its staging rings draw on `budget` (the process's, by default).
  CopyEngine(const DriverApi& driver, const Config& config,
             PinnedBudget& budget = PinnedBudget::process());
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // Must be called on the thread that issued the copy, with the stream's context current.
  CopyOutcome copy(const CopyRequest& request) noexcept;

  const Config& config() const { return config_; }
  // The lanes built so far (those not busy copying right now).
  std::vector<LaneInfo> lanes();
  // Copies waiting for a lane now.
  std::size_t waiting_copies();
  // The CPU time the copy threads of every GPU have used so far (WorkerPool::cpu_seconds).
  double copy_threads_cpu_seconds();
  // The context `ctx` ends (cuCtxDestroy, a primary context's reset or last release): its lanes
  // go, their rings freed and their queues kept for the lanes of contexts to come, so that a
  // context made later (the driver may give it the same handle) starts afresh and nothing of
  // the ended one stays pinned. `alive`: called before the driver destroys it, still usable, so
  // the rings' events are destroyed and their memory unregistered in it. Otherwise the driver
  // has destroyed it, and every handle made in it is dropped untouched: its value may name a new
  // object by now. A lane held by a copy on another thread (a program that ends a context while
  // it copies in it) goes when that copy lets it go, its ring leaked: its DMAs' state is unknown.
  // Returns the lanes let go, now or at their copy's end.
  unsigned forget_context(CUcontext ctx, bool alive);

  struct Lane;
  struct GpuPool;
  class LaneHold;

 private:
  // A copy waiting for a lane: the lane is handed to it (`given`) by the copy that frees it.
  struct LaneWaiter {
    CUcontext ctx;
    Direction direction;
    unsigned most;  // it takes only lanes of index below this (lanes_for)
    Lane* given = nullptr;
    std::condition_variable handed;
  };

  // Takes a lane for (ctx, direction) among the first `most`: a free one, else a new one while
  // there are fewer than `most`, else waits for one within rules::kLaneWait (`wait` false: not
  // at all); nullptr if none came. Waiting copies sleep, and freed lanes go to them in the order they asked: a
  // waiter that spun took cores from the copy threads at work (8 Python threads on one lane each
  // copied at half the rate one thread alone did), and one that raced for the lane could lose it
  // for tens of milliseconds (bench/lab/NOTES.md 46).
  Lane* acquire_lane(CUcontext ctx, Direction direction, unsigned most, bool wait);
  // Hands `lane` to the first copy waiting for its context and direction that may take it, or
  // frees it; a lane whose context ended meanwhile (forget_context) is let go.
  void release_lane(Lane& lane);
  // Frees a lane taken out of lanes_: its ring (`alive`: its context current, else orphaned
  // first), its queue kept by its GPU's pool for a lane to come.
  void let_go(std::unique_ptr<Lane> lane, bool alive);
  // The lanes a copy of `bytes` on `stream` may take, per context and direction: one below
  // config.lane_split_from, else config.lanes, else rules::kAutoLanes, or
  // rules::kAutoLanesLegacy for a copy on the legacy stream. Medium copies side by side each
  // start a pipeline of their own on part of the threads: taking turns on one lane, 8 threads x
  // 16 MiB both ways reached 67.5 GB/s against 62.8, a model loader's 1-8 threads the same speed
  // within the runs' noise at less CPU (0.34-0.36 s/GB against 0.50-0.60 with 4 threads), and
  // one pinned ring per direction serves them (bench/lab/NOTES.md 48). Two long copies each
  // way at once share the GPU's pool well, and a short copy need not wait behind a long one; more
  // callers wait for a lane. Measured on the H200 (8 threads x 256 MiB both ways, bench/results):
  // 2 lanes each way 79.6 GB/s, 1 lane 62.8, 8 lanes 65.8 (more copies at once, each on fewer
  // threads). On the legacy default stream (rules::kAutoLanesLegacy) CUDA runs every thread's
  // copies one after another, so a copy mostly waits for the stream; more lanes let more copies
  // stage meanwhile. Same benchmark on the legacy stream: 2 lanes 39.2 GB/s, 4 lanes 46.2-46.9,
  // 8 lanes 47.1-47.8 (lab/NOTES.md 34).
  unsigned lanes_for(CUstream stream, std::size_t bytes) const;
  CUresult prepare(Lane& lane);  // builds the lane's ring and queue; called holding the lane
  // The copy threads of the GPU at `pci`, started with the first lane that needs them: one
  // copy's worth, `per_copy`, and `most` once two of the GPU's copies run at once; idle as
  // `gpu_config` (that GPU's knobs) says: spin_us, wake_ahead. `*started_ns`: how long starting
  // them took, 0 where they were running already.
  GpuPool& pool_for(const std::string& pci, unsigned per_copy, unsigned most,
                    const std::vector<int>& cpus, const Config& gpu_config,
                    std::int64_t* started_ns);
  CopyOutcome host_to_device(Lane& lane, const CopyRequest& request);
  CopyOutcome device_to_host(Lane& lane, const CopyRequest& request);

  const DriverApi& driver_;
  const Config config_;
  // Pinned staging memory is unswappable: every ring draws on this budget, whatever the options
  // ask for (a lane that would pass it forwards).
  PinnedBudget& budget_;
  std::mutex pools_mu_;
  std::vector<std::unique_ptr<GpuPool>> pools_;  // one per PCI bus id
  std::mutex lanes_mu_;  // guards lanes_, each lane's `held` and waiters_
  std::vector<std::unique_ptr<Lane>> lanes_;  // destroyed before the pools their queues are on
  std::deque<LaneWaiter*> waiters_;           // in the order they asked
};

}  // namespace cmt
