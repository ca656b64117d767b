#include "engine/device/copy_engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "common/log.h"
#include "engine/device/copy_tasks.h"
#include "engine/device/copy_trace.h"
#include "engine/shared/fresh_pages.h"
#include "engine/shared/gpu_locality.h"
#include "engine/device/pipeline.h"
#include "engine/shared/staging_ring.h"
#include "engine/shared/worker_pool.h"

namespace cmt {
namespace {

// A broken ring is leaked, not freed (a DMA may still touch it), and rebuilt; a lane whose ring
// broke this many times forwards for good, so that a driver that keeps failing cannot make cmt
// leak pinned memory without end.
constexpr unsigned kMaxBrokenRings = 2;

}  // namespace

// A GPU's copy threads. They start as one copy's worth: a second set of threads spinning beside a
// copy that cannot use them costs it (their polling of the queues' shared lines slowed one
// 16 MiB device-to-host copy at a time from 33 to 28-29 GB/s on the H200 machine). The first
// time two copies to the GPU overlap, the pool grows to room for both.
struct CopyEngine::GpuPool {
  std::string pci;
  std::unique_ptr<WorkerPool> threads;
  unsigned most = 0;                // the size it grows to
  std::atomic<unsigned> copies{0};  // copies running on it now
  std::atomic<bool> grown{false};
  // Queues of lanes let go (their contexts ended), for new lanes: a pool has kMaxQueues at most.
  std::mutex spare_mu;
  std::vector<WorkQueue*> spare_queues;

  WorkQueue* queue_for_lane(unsigned per_copy) {
    {
      std::lock_guard<std::mutex> lk(spare_mu);
      if (!spare_queues.empty()) {
        WorkQueue* q = spare_queues.back();
        spare_queues.pop_back();
        return q;
      }
    }
    return threads->add_queue(per_copy);
  }
  // Called from a lane's release too (a destructor): nothing may escape it.
  void keep_spare(WorkQueue* q) noexcept {
    try {
      std::lock_guard<std::mutex> lk(spare_mu);
      spare_queues.push_back(q);
    } catch (...) {  // the pool keeps one queue fewer for the lanes to come
    }
  }

  // While it lives, a copy is running on the pool.
  class Running {
   public:
    explicit Running(GpuPool& pool) : pool_(pool) {
      if (pool.copies.fetch_add(1, std::memory_order_acq_rel) > 0) pool.grow();
    }
    ~Running() { pool_.copies.fetch_sub(1, std::memory_order_acq_rel); }
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;

   private:
    GpuPool& pool_;
  };

  void grow() {
    if (grown.exchange(true)) return;
    try {
      threads->grow(most);
    } catch (...) {  // the pool keeps the threads it has; copies share them
      CMT_LOG(warn, "GPU {}: cannot start more copy threads; concurrent copies share {}",
              pci.empty() ? "?" : pci, threads->size());
    }
  }
};

struct CopyEngine::Lane {
  CUcontext ctx = nullptr;
  Direction direction = Direction::HostToDevice;
  // Held by one copy at a time (acquire_lane), which alone uses the fields below; guarded by the
  // engine's lanes_mu_, whose lock and unlock at each hand-over order their accesses.
  bool held = false;
  // Its context ended while a copy held it (forget_context): let go at that copy's end, never
  // taken again. Guarded by lanes_mu_.
  bool ended = false;
  Config config;  // the engine's, with the knobs of this lane's GPU applied (set by prepare)
  std::unique_ptr<StagingRing> ring;
  WorkQueue* queue = nullptr;  // on the GPU's shared pool (pool_for), for this lane's copies
  GpuPool* pool = nullptr;
  std::uint64_t next_ticket = 1;
  unsigned broken_rings = 0;            // rings given up so far (kMaxBrokenRings)
  CUresult broken_by = CUDA_SUCCESS;    // what broke the last one
  CUresult unavailable = CUDA_SUCCESS;  // set if the lane could not be built: forward for good
  int index = 0;  // among its context's and direction's lanes, in the order made
  std::int64_t build_ns = 0;          // the last prepare that built its ring, whole (LaneInfo)
  std::int64_t threads_start_ns = 0;  // the part of it that started the GPU's copy threads
};

CopyEngine::CopyEngine(const DriverApi& driver, const Config& config, PinnedBudget& budget)
    : driver_(driver), config_(config), budget_(budget) {}

CopyEngine::~CopyEngine() = default;

unsigned CopyEngine::lanes_for(CUstream stream, std::size_t bytes) const {
  if (bytes < config_.lane_split_from) return 1;
  if (config_.lanes) return config_.lanes;
  return stream == CU_STREAM_LEGACY ? rules::kAutoLanesLegacy : rules::kAutoLanes;
}

// A lane taken by a copy, given back (to the next waiting copy) when it goes.
class CopyEngine::LaneHold {
 public:
  LaneHold(CopyEngine& engine, Lane& lane) : engine_(engine), lane_(lane) {}
  ~LaneHold() { engine_.release_lane(lane_); }
  LaneHold(const LaneHold&) = delete;
  LaneHold& operator=(const LaneHold&) = delete;

 private:
  CopyEngine& engine_;
  Lane& lane_;
};

CopyEngine::Lane* CopyEngine::acquire_lane(CUcontext ctx, Direction direction, unsigned most,
                                           bool wait) {
  std::unique_lock<std::mutex> lk(lanes_mu_);
  // A free lane means no copy waits for one of its kind: freed lanes go to waiters first.
  unsigned existing = 0;
  for (auto& lane : lanes_) {
    if (lane->ctx != ctx || lane->direction != direction || lane->ended) continue;
    ++existing;
    if (!lane->held && static_cast<unsigned>(lane->index) < most) {
      lane->held = true;
      return lane.get();
    }
  }
  if (existing < most) {  // every lane is busy: this copy gets one of its own
    lanes_.push_back(std::make_unique<Lane>());
    Lane* lane = lanes_.back().get();
    lane->ctx = ctx;
    lane->direction = direction;
    lane->index = static_cast<int>(existing);
    lane->held = true;
    return lane;
  }
  // The link is the limit either way, so wait for a lane, but not forever: CUDA then takes the
  // copy.
  if (!wait) return nullptr;
  LaneWaiter me;
  me.ctx = ctx;
  me.direction = direction;
  me.most = most;
  waiters_.push_back(&me);
  const auto deadline = std::chrono::steady_clock::now() + rules::kLaneWait;
  if (!me.handed.wait_until(lk, deadline, [&] { return me.given != nullptr; })) {
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &me));
    return nullptr;
  }
  return me.given;
}

void CopyEngine::release_lane(Lane& lane) {
  std::unique_lock<std::mutex> lk(lanes_mu_);
  if (lane.ended) {
    auto it = std::find_if(lanes_.begin(), lanes_.end(), [&](auto& l) { return l.get() == &lane; });
    std::unique_ptr<Lane> gone = std::move(*it);
    lanes_.erase(it);
    lk.unlock();
    // Its copy may have left DMAs queued in a context that is gone by now, or going, and its
    // events cannot say which: the ring is leaked, as a broken one is, and stays counted.
    if (gone->ring) (void)gone->ring.release();
    let_go(std::move(gone), false);
    return;
  }
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    LaneWaiter* waiter = *it;
    if (waiter->ctx != lane.ctx || waiter->direction != lane.direction ||
        static_cast<unsigned>(lane.index) >= waiter->most)
      continue;
    waiters_.erase(it);
    waiter->given = &lane;  // still held: it passes straight to the waiter
    // Under the lock: the waiter cannot leave (and take its condition variable with it) before.
    waiter->handed.notify_one();
    return;
  }
  lane.held = false;
}

unsigned CopyEngine::forget_context(CUcontext ctx, bool alive) {
  std::vector<std::unique_ptr<Lane>> gone;
  unsigned count = 0;
  {
    std::lock_guard<std::mutex> lk(lanes_mu_);
    for (auto it = lanes_.begin(); it != lanes_.end();) {
      Lane& lane = **it;
      if (lane.ctx != ctx || lane.ended) {
        ++it;
        continue;
      }
      ++count;
      if (lane.held) {  // a copy on another thread: it lets go of the lane at its end
        lane.ended = true;
        ++it;
        continue;
      }
      gone.push_back(std::move(*it));
      it = lanes_.erase(it);
    }
  }
  if (gone.empty()) return count;
  // The rings' events and registrations were made in `ctx`: freed there while it lives.
  std::optional<ScopedContext> in;
  if (alive) in.emplace(driver_, ctx);
  const bool usable = alive && in->ok();
  for (auto& lane : gone) let_go(std::move(lane), usable);
  return count;
}

void CopyEngine::let_go(std::unique_ptr<Lane> lane, bool alive) {
  if (lane->ring) {
    if (!alive) lane->ring->orphan();
    lane->ring.reset();  // its memory and pinned budget back; a broken ring was leaked before
  }
  if (lane->queue) lane->pool->keep_spare(lane->queue);
}

CUresult CopyEngine::prepare(Lane& lane) {
  if (lane.unavailable != CUDA_SUCCESS) return lane.unavailable;
  if (lane.ring && !lane.ring->broken()) return CUDA_SUCCESS;
  const std::int64_t began_ns = steady_now_ns();
  // Staging memory near the GPU, workers on its cores.
  CUdevice device = 0;
  char bus_id[64] = {};
  std::string pci;
  if (driver_.ctx_get_device(&device) == CUDA_SUCCESS &&
      driver_.device_get_pci_bus_id(bus_id, sizeof(bus_id), device) == CUDA_SUCCESS)
    pci = bus_id;
  // A lane that cannot be had forwards for good, and says why once: once per lane, so that each
  // GPU and direction that fails is named, not only the first.
  const char* dir = lane.direction == Direction::HostToDevice ? "host-to-device" : "device-to-host";
  auto give_up = [&](CUresult why, const std::string& what) {
    lane.unavailable = why;
    CMT_LOG(warn, "GPU {} ({}), {} copies: {}; cmt forwards them to CUDA", static_cast<int>(device),
            pci.empty() ? "?" : pci, dir, what);
    return why;
  };
  // A broken ring's DMAs are in an unknown state (e.g. its context was reset): leak it rather
  // than free memory a DMA may still touch, and build a fresh one, a few times at most.
  if (lane.ring) {
    (void)lane.ring.release();
    if (++lane.broken_rings >= kMaxBrokenRings) {
      const CUresult why = lane.broken_by != CUDA_SUCCESS ? lane.broken_by : CUDA_ERROR_UNKNOWN;
      return give_up(why, "the staging ring broke " + std::to_string(lane.broken_rings) +
                              " times (" + cuda_error_text(driver_, why) + ")");
    }
  }
  GpuLocality where = gpu_locality(pci, config_.gpu_cores);
  lane.config = config_for_gpu(config_, pci);
  const Config& c = lane.config;
  CUresult r = CUDA_SUCCESS;
  const std::size_t slot_bytes =
      lane.direction == Direction::DeviceToHost ? c.d2h_chunk_bytes : c.chunk_bytes;
  // Options allow up to 1024 slots of 1 GiB per lane: the ring is faulted in before it is
  // registered, so a ring past the machine's means would be an out-of-memory kill, not an error.
  // Its bytes are taken from the budget before it is allocated, so that lanes prepared at once
  // cannot pass the limit together; a broken ring is leaked, and stays counted.
  const std::size_t ring_bytes = std::size_t{c.slots} * slot_bytes;
  PinnedBudget::Hold hold = budget_.take(ring_bytes);
  if (!hold)
    return give_up(CUDA_ERROR_OUT_OF_MEMORY,
                   std::to_string(c.slots) + " staging buffers of " + std::to_string(slot_bytes) +
                       " bytes would take cmt's pinned memory to " +
                       std::to_string((budget_.taken() + ring_bytes) >> 20) + " MiB, past " +
                       std::to_string(budget_.limit() >> 20) + " MiB (" + rules::kPinnedShareText +
                       " of this machine's memory)");
  lane.threads_start_ns = 0;  // a rebuilt ring's lane has its threads
  if (!lane.queue) {
    // Every lane of a GPU draws on one pool of threads, each copy on at most `per_copy` of them
    // plus its issuer, so concurrent copies share the cores instead of oversubscribing them.
    // Sized by the cores the process's CPU quota can keep busy (common/cpu_quota.h).
    const std::size_t usable = usable_cpus(where.cpus.size());
    const unsigned per_copy = c.threads ? c.threads : auto_threads(usable);
    const unsigned threads = pool_threads(per_copy, usable);
    std::string why = "more lanes than a pool serves";
    try {
      GpuPool& pool = pool_for(pci, per_copy, threads, where.cpus, c, &lane.threads_start_ns);
      lane.queue = pool.queue_for_lane(per_copy);
      lane.pool = &pool;
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
      why = "an unknown error";
    }
    if (!lane.queue)
      return give_up(CUDA_ERROR_OPERATING_SYSTEM,
                     "cannot start " + std::to_string(threads) + " copy threads (" + why + ")");
  }
  // The threads first: they fault the ring in, a 2 MiB block each, where one thread took most of
  // the build (lab/NOTES.md 88).
  lane.ring = StagingRing::create(driver_, c.slots, slot_bytes, where.numa_node, std::move(hold),
                                  &r, lane.queue);
  if (!lane.ring) {
    const CUresult why = r == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : r;
    return give_up(why, "cannot allocate " + std::to_string(c.slots) + " x " +
                            std::to_string(slot_bytes) + " bytes of pinned staging memory (" +
                            cuda_error_text(driver_, why) + ")");
  }
  lane.build_ns = steady_now_ns() - began_ns;
  // Said at each build (a broken ring's replacement too): its first copy waited this long.
  const RingBuildTimes& t = lane.ring->build_times();
  CMT_LOG(info,
          "lane ready: device {} ({}), NUMA node {}, {} threads per copy of the GPU's {} (up to {} "
          "once its copies overlap) on {} cores from {}, {} x {} KiB staging; built in {:.1f} ms "
          "(staging memory faulted in {:.1f} ms, registered {:.1f} ms; copy threads started {:.1f} "
          "ms)",
          static_cast<int>(device), pci.empty() ? "?" : pci, where.numa_node, lane.queue->threads(),
          lane.pool->threads->size(), lane.pool->most, where.cpus.size(), where.cpus.front(),
          c.slots, slot_bytes >> 10, lane.build_ns / 1e6, t.fault_ns / 1e6, t.register_ns / 1e6,
          lane.threads_start_ns / 1e6);
  return CUDA_SUCCESS;
}

CopyEngine::GpuPool& CopyEngine::pool_for(const std::string& pci, unsigned per_copy, unsigned most,
                                          const std::vector<int>& cpus, const Config& gpu_config,
                                          std::int64_t* started_ns) {
  std::lock_guard<std::mutex> lk(pools_mu_);
  *started_ns = 0;
  for (auto& pool : pools_)
    if (pool->pci == pci) return *pool;
  const std::int64_t began_ns = steady_now_ns();
  auto pool = std::make_unique<GpuPool>();
  pool->pci = pci;
  pool->most = std::max(most, per_copy);
  pool->threads = std::make_unique<WorkerPool>(
      per_copy, cpus, std::chrono::microseconds(gpu_config.spin_us), FaultSignals::Blocked,
      gpu_config.wake_ahead);
  pools_.push_back(std::move(pool));
  *started_ns = steady_now_ns() - began_ns;
  return *pools_.back();
}

std::vector<LaneInfo> CopyEngine::lanes() {
  std::vector<LaneInfo> out;
  std::lock_guard<std::mutex> lk(lanes_mu_);
  for (auto& lane : lanes_) {
    if (lane->held || lane->ended || !lane->ring || !lane->queue) continue;
    out.push_back({lane->ctx, lane->direction, lane->queue->threads(), lane->pool->threads->size(),
                   lane->ring->size(), lane->ring->slot_bytes(), lane->build_ns,
                   lane->ring->build_times(), lane->threads_start_ns});
  }
  return out;
}

double CopyEngine::copy_threads_cpu_seconds() {
  std::lock_guard<std::mutex> lk(pools_mu_);
  double total = 0;
  for (auto& pool : pools_) total += pool->threads->cpu_seconds();
  return total;
}

std::size_t CopyEngine::waiting_copies() {
  std::lock_guard<std::mutex> lk(lanes_mu_);
  return waiters_.size();
}

CopyOutcome CopyEngine::copy(const CopyRequest& request) noexcept {
  try {
    if (request.bytes == 0) return {0, CUDA_SUCCESS};
    CUcontext ctx = nullptr;
    CUresult r = driver_.ctx_get_current(&ctx);
    if (r != CUDA_SUCCESS || !ctx) return {0, r == CUDA_SUCCESS ? CUDA_ERROR_INVALID_CONTEXT : r};
    // Relaxed for the whole copy: another thread's global-mode capture must not be invalidated
    // by what the engine does on this thread's own streams.
    RelaxedCaptureMode relaxed(driver_);
    const std::int64_t asked_ns = steady_now_ns();
    Lane* acquired =
        acquire_lane(ctx, request.direction, lanes_for(request.stream, request.bytes),
                     !request.no_wait);
    if (!acquired) return {0, CUDA_SUCCESS};
    Lane& lane = *acquired;
    const LaneHold hold(*this, lane);
    const std::int64_t start_ns = steady_now_ns();
    const bool had_ring = lane.ring && !lane.ring->broken();
    r = prepare(lane);
    if (r != CUDA_SUCCESS) return {0, r};
    // Host to device: the workers have work at once, so let them come up while the issuer
    // prepares. Device to host: they have none until the first DMA lands, so the DMAs are
    // enqueued before the wake-up's system call (device_to_host).
    const GpuPool::Running running(*lane.pool);
    if (request.direction == Direction::HostToDevice) lane.queue->wake();
    CopyOutcome out = request.direction == Direction::HostToDevice
                          ? host_to_device(lane, request)
                          : device_to_host(lane, request);
    if (lane.ring->broken()) lane.broken_by = out.status;
    out.lane = lane.index;
    out.lane_built = !had_ring;
    if (out.first_dma_ns >= 0) out.first_dma_ns -= start_ns;
    out.lane_wait_ns = start_ns - asked_ns;
    out.threads_sleep_after = lane.pool->threads->sleeps_between_jobs();
    out.threads_asleep_after = lane.pool->threads->cpus_taken();
    return out;
  } catch (...) {
    return {0, CUDA_ERROR_UNKNOWN};
  }
}

CopyOutcome CopyEngine::host_to_device(Lane& lane, const CopyRequest& req) {
  StagingRing& ring = *lane.ring;
  WorkQueue& pool = *lane.queue;
  CopyTrace trace;
  if (req.synchronous) {
    // cudaMemcpy from pageable memory synchronizes the stream before it copies.
    CUresult status = CUDA_SUCCESS;
    if (CMT_CUDA_FAILED(driver_, driver_.stream_synchronize(req.stream), status))
      return {0, status};
  }
  trace.mark(trace.ready_us);
  const CopyLayout layout = plan_copy(req.bytes, pool.threads() + 1, ring.slot_bytes(),
                                      lane.config.ramp, lane.config.chunk_bytes);
  const std::uint64_t base = lane.next_ticket;
  lane.next_ticket += layout.pieces;

  StageIn task(static_cast<const char*>(req.host), layout, ring, base,
               staging_method(lane.config.h2d_method, req.bytes), trace);
  Pipeline pipe(driver_, ring, pool, req, layout, base, trace);
  pool.begin(&task);
  std::size_t published = 0, issued = 0;
  // Returns when every piece's DMA is enqueued, or when the copy must stop.
  auto pump = [&] {
    while (issued < layout.pieces) {
      bool progress = false;
      // Hand workers every piece whose slot has no DMA in flight.
      while (published < layout.pieces && published < issued + ring.size()) {
        const SlotState s = pipe.slot_free(published);
        if (s == SlotState::Stop) return;
        if (s == SlotState::Busy) break;
        pool.publish(++published * layout.units_per_piece);
        progress = true;
      }
      // Enqueue the next piece's DMA as soon as a worker has staged it.
      if (issued < published &&
          ring.slot(base + issued).ticket.load(std::memory_order_acquire) == base + issued) {
        bool enqueued = false;
        const bool ok = pipe.enqueue_dma(issued, &enqueued);
        if (enqueued) ++issued;  // its bytes reach the device even if its event failed
        if (!ok) return;
        progress = true;
      }
      pipe.pace(progress);
    }
  };
  pump();
  trace.mark(trace.last_piece_us);
  pool.end();  // published pieces finish staging; nothing else touches the user's buffer after
  trace.report("H2D", layout);
  trace.report_dma_completions(ring, base, issued > ring.size() ? issued - ring.size() : 0, issued);
  CopyOutcome out{layout.piece_offset(issued), pipe.status()};
  out.first_dma_ns = pipe.first_enqueue_ns();  // made relative to the copy's start by copy()
  return out;
}

CopyOutcome CopyEngine::device_to_host(Lane& lane, const CopyRequest& req) {
  StagingRing& ring = *lane.ring;
  WorkQueue& pool = *lane.queue;
  const CopyLayout layout = plan_copy(req.bytes, pool.threads() + 1, ring.slot_bytes(),
                                      lane.config.ramp, lane.config.chunk_bytes);
  const std::uint64_t base = lane.next_ticket;
  lane.next_ticket += layout.pieces;
  CopyTrace trace;
  trace.mark(trace.ready_us);

  // A fresh destination is populated first, block by block on every thread, while the first
  // DMAs fill the ring; the drain starts once that is done (engine/shared/fresh_pages.h).
  const FreshBlocks fresh = find_fresh(lane.config.fresh_pages, req.host, req.bytes);
  if (lane.config.fresh_pages == FreshPages::Huge) advise_huge_pages(fresh);
  PopulateFresh populate(fresh);
  DrainOut task(static_cast<char*>(req.host), layout, ring, base,
                drain_method(lane.config.d2h_method, req.bytes), trace);
  Pipeline pipe(driver_, ring, pool, req, layout, base, trace);
  bool populating = fresh.count > 0;
  pool.begin(populating ? static_cast<UnitTask*>(&populate) : &task);
  if (populating) pool.publish(fresh.count);
  std::size_t issued = 0, landed = 0;
  bool woken = false;
  // Ends the populate job, so that landed pieces can be drained.
  auto start_draining = [&] {
    pool.end();
    populating = false;
    trace.mark(trace.populated_us);
    pool.begin(&task);
    pool.publish(landed * layout.units_per_piece);
  };
  // Returns when every piece has landed (and population is over), or when the copy must stop.
  auto pump = [&] {
    while (landed < layout.pieces || populating) {
      bool progress = false;
      // DMA into every slot that is free: its previous piece drained, no DMA in flight.
      while (issued < layout.pieces && issued < landed + ring.size()) {
        if (issued >= ring.size() &&
            ring.slot(base + issued).ticket.load(std::memory_order_acquire) !=
                base + issued - ring.size())
          break;
        const SlotState s = pipe.slot_free(issued);
        if (s == SlotState::Stop) return;
        if (s == SlotState::Busy) break;
        bool enqueued = false;
        if (!pipe.enqueue_dma(issued, &enqueued)) return;
        ++issued;
        progress = true;
      }
      // The first drain comes once the first DMA lands: the workers are woken after every DMA
      // that can go is enqueued, so that none waits for the wake-up's system call (waking eight
      // sleeping threads took the issuer 15-20 us on the H200 VM, as long as a DMA takes to
      // land: bench/lab/NOTES.md 34). Populating, they have work already.
      if (!woken && issued > 0 && !populating) {
        pool.wake();
        woken = true;
      }
      // Hand workers each piece whose DMA has landed, in order.
      if (landed < issued) {
        const SlotState s = pipe.landed(landed);
        if (s == SlotState::Stop) return;
        if (s == SlotState::Free) {
          ++landed;
          trace.piece_landed();
          if (!populating) pool.publish(landed * layout.units_per_piece);
          if (landed == layout.pieces) trace.mark(trace.last_piece_us);
          progress = true;
        }
      }
      if (populating && pool.finished() == fresh.count) {
        start_draining();
        progress = true;
      }
      pipe.pace(progress);
    }
  };
  pump();
  if (populating) start_draining();  // stopped early: the landed pieces still go to the user
  pool.end();                        // every landed piece is in the user's buffer when this returns
  trace.report("D2H", layout);
  if (fresh.count)
    CMT_LOG(debug, "D2H into a fresh destination: {} blocks of 2 MiB {} ({}), populated at {} us",
            fresh.count, populate.refused() ? "left to fault" : "populated",
            choice_name(lane.config.fresh_pages), trace.populated_us);
  CopyOutcome out{layout.piece_offset(landed), pipe.status(), fresh.count * kFreshBlock};
  out.first_dma_ns = pipe.first_enqueue_ns();  // made relative to the copy's start by copy()
  return out;
}

}  // namespace cmt
