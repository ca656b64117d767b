#include "engine/copy_engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>

#include "engine/fresh_pages.h"
#include "engine/gpu_locality.h"
#include "engine/host_copy.h"
#include "common/log.h"
#include "engine/staging_ring.h"
#include "engine/worker_pool.h"

namespace cmt {
namespace {

// A slot still busy with a DMA on *another* stream may wait on work that only this caller can
// release (a cross-stream event). Past this long without progress the engine stops and lets CUDA
// finish the copy, so it can never deadlock where plain CUDA would not.
constexpr auto kForeignStallLimit = std::chrono::milliseconds(100);

constexpr std::size_t kPiecesPerCopy = 8;
// Pieces grow past chunk_bytes (up to a D2H slot) only in copies at least this many of them long.
constexpr std::size_t kPiecesPerLongCopy = 64;

// Staging with non-temporal stores measured 1.5x faster for 4 MiB host-to-device copies on the
// H200 machine, 1.14x at 64 MiB, and 10-15% slower at 1 GiB, where ordinary stores leave the
// staging buffers in the last-level cache for the DMA to read (bench/NOTES.md 10, 12).
constexpr std::size_t kStreamingStageBelow = 256u << 20;
constexpr std::size_t kMinPiece = 256 << 10;
constexpr std::size_t kMinUnit = 64 << 10;
// Ramp pieces: the first and last pieces of a copy halve down to this (and their units to 16 KiB).
constexpr std::size_t kRampFloor = 256 << 10;
constexpr std::size_t kMaxRamp = 4;
constexpr std::size_t kMinRampUnit = 16 << 10;

// Device-to-host destinations from this size on are checked for fresh (never written) pages.
// Smaller ones hold at most one whole huge page, and glibc's heap serves many of them, where
// splitting its mapping for one block would gain little.
constexpr std::size_t kFreshPagesFrom = 8u << 20;

// How long a copy waits for a free lane (every one busy with another thread's copy) before
// leaving it to CUDA.
constexpr auto kLaneWaitLimit = std::chrono::milliseconds(200);

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

CopyMethod staging_method(CopyMethod configured, std::size_t bytes) {
  if (configured != CopyMethod::Auto) return configured;
  return bytes < kStreamingStageBelow ? CopyMethod::Streaming : CopyMethod::Memcpy;
}

CopyLayout plan_copy(std::size_t bytes, unsigned threads, std::size_t slot_bytes, bool ramp,
                     std::size_t medium_piece) {
  CopyLayout l;
  l.bytes = bytes;
  std::size_t largest = slot_bytes;
  if (medium_piece)
    largest =
        std::min(slot_bytes, std::max(medium_piece, round_up(bytes / kPiecesPerLongCopy, 4096)));
  l.piece = std::clamp(round_up(std::max<std::size_t>(bytes / kPiecesPerCopy, 1), 4096),
                       std::min(kMinPiece, largest), largest);
  // Each ramp step halves the first and last pieces while they stay whole pages of at least
  // kRampFloor and the copy keeps a steady piece between the two ramps.
  while (ramp && l.ramp < kMaxRamp) {
    const std::size_t next = l.ramp + 1, smallest = l.piece >> next;
    if (smallest < kRampFloor || l.piece % (std::size_t{4096} << next) != 0 ||
        bytes < 2 * (l.piece - smallest) + l.piece)
      break;
    l.ramp = next;
  }
  const std::size_t ends = 2 * (l.piece - (l.piece >> l.ramp));
  l.pieces = 2 * l.ramp + (bytes - ends + l.piece - 1) / l.piece;
  std::size_t share = (l.piece + std::max(1u, threads) - 1) / std::max(1u, threads);
  std::size_t unit = std::clamp(round_up(share, 4096), std::min(kMinUnit, l.piece), l.piece);
  l.units_per_piece = (l.piece + unit - 1) / unit;
  return l;
}

std::size_t CopyLayout::piece_offset(std::size_t i) const {
  const std::size_t first = piece >> ramp;  // the smallest piece, at each end
  if (i <= ramp) return first * ((std::size_t{1} << i) - 1);
  const std::size_t head = piece - first, steady_end = bytes - head;
  const std::size_t steady = (steady_end - head + piece - 1) / piece;
  if (i <= ramp + steady) return std::min(head + (i - ramp) * piece, steady_end);
  const std::size_t j = std::min(i - ramp - steady, ramp);  // ramp pieces down: piece/2, /4, ...
  return steady_end + piece - (piece >> j);
}

std::size_t CopyLayout::unit_length(std::size_t i) const {
  const std::size_t length = piece_length(i);
  return std::max(round_up((length + units_per_piece - 1) / units_per_piece, 4096), kMinRampUnit);
}

unsigned auto_threads(std::size_t local_cpus) {
  return static_cast<unsigned>(std::clamp<std::size_t>(local_cpus / 2, 1, 8));
}

struct CopyEngine::Lane {
  CUcontext ctx = nullptr;
  Direction direction = Direction::HostToDevice;
  Config config;    // the engine's, with the knobs of this lane's GPU applied (set by prepare)
  std::mutex busy;  // one copy at a time per context and direction; guards all below
  std::unique_ptr<StagingRing> ring;
  std::unique_ptr<WorkerPool> pool;
  std::uint64_t next_ticket = 1;
  CUresult unavailable = CUDA_SUCCESS;  // set if the lane could not be built: forward for good
};

CopyEngine::CopyEngine(const DriverApi& driver, const Config& config)
    : driver_(driver), config_(config) {}

CopyEngine::~CopyEngine() = default;

CopyEngine::Lane* CopyEngine::acquire_lane(CUcontext ctx, Direction direction,
                                           std::unique_lock<std::mutex>& hold) {
  const auto deadline = std::chrono::steady_clock::now() + kLaneWaitLimit;
  const unsigned most = std::max(1u, config_.lanes);
  Backoff backoff;
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(lanes_mu_);
      unsigned existing = 0;
      for (auto& lane : lanes_) {
        if (lane->ctx != ctx || lane->direction != direction) continue;
        ++existing;
        std::unique_lock<std::mutex> mine(lane->busy, std::try_to_lock);
        if (mine) {
          hold = std::move(mine);
          return lane.get();
        }
      }
      if (existing < most) {  // every lane is busy: another thread gets one of its own
        lanes_.push_back(std::make_unique<Lane>());
        Lane* lane = lanes_.back().get();
        lane->ctx = ctx;
        lane->direction = direction;
        hold = std::unique_lock<std::mutex>(lane->busy);
        return lane;
      }
    }
    // The link is the limit either way, so wait for a lane, but not forever: CUDA then takes
    // the copy.
    if (std::chrono::steady_clock::now() > deadline) return nullptr;
    backoff.pause();
  }
}

CUresult CopyEngine::prepare(Lane& lane) {
  if (lane.unavailable != CUDA_SUCCESS) return lane.unavailable;
  if (lane.ring && !lane.ring->broken()) return CUDA_SUCCESS;
  // A broken ring's DMAs are in an unknown state (e.g. its context was reset): leak it rather
  // than free memory a DMA may still touch, and build a fresh one.
  if (lane.ring) (void)lane.ring.release();
  // Staging memory near the GPU, workers on its cores.
  CUdevice device = 0;
  char bus_id[64] = {};
  std::string pci;
  if (driver_.ctx_get_device(&device) == CUDA_SUCCESS &&
      driver_.device_get_pci_bus_id(bus_id, sizeof(bus_id), device) == CUDA_SUCCESS)
    pci = bus_id;
  GpuLocality where = gpu_locality(pci);
  lane.config = config_for_gpu(config_, pci);
  const Config& c = lane.config;
  CUresult r = CUDA_SUCCESS;
  const std::size_t slot_bytes =
      lane.direction == Direction::DeviceToHost ? c.d2h_chunk_bytes : c.chunk_bytes;
  lane.ring = StagingRing::create(driver_, c.slots, slot_bytes, where.numa_node, &r);
  if (!lane.ring) {
    lane.unavailable = r == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : r;
    CMT_WARN_ONCE(
        "cannot allocate {} x {} bytes of pinned staging memory (CUDA error {}); "
        "cmt forwards these copies to CUDA",
        c.slots, slot_bytes, static_cast<int>(r));
    return lane.unavailable;
  }
  if (!lane.pool) {
    unsigned threads = c.threads ? c.threads : auto_threads(where.cpus.size());
    try {
      lane.pool =
          std::make_unique<WorkerPool>(threads, where.cpus, std::chrono::microseconds(c.spin_us));
    } catch (...) {
      lane.unavailable = CUDA_ERROR_OUT_OF_MEMORY;
      lane.ring.reset();
      CMT_WARN_ONCE("cannot start {} copy threads; cmt forwards these copies to CUDA", threads);
      return lane.unavailable;
    }
    CMT_LOG(info, "lane ready: device {} ({}), NUMA node {}, {} threads, {} x {} KiB staging",
            static_cast<int>(device), pci.empty() ? "?" : pci, where.numa_node, threads, c.slots,
            slot_bytes >> 10);
  }
  return CUDA_SUCCESS;
}

std::vector<LaneInfo> CopyEngine::lanes() {
  std::vector<LaneInfo> out;
  std::lock_guard<std::mutex> lk(lanes_mu_);
  for (auto& lane : lanes_) {
    std::unique_lock<std::mutex> hold(lane->busy, std::try_to_lock);
    if (!hold || !lane->ring || !lane->pool) continue;
    out.push_back({lane->ctx, lane->direction, lane->pool->size(), lane->ring->size(),
                   lane->ring->slot_bytes()});
  }
  return out;
}

CopyOutcome CopyEngine::copy(const CopyRequest& request) noexcept {
  try {
    if (request.bytes == 0) return {0, CUDA_SUCCESS};
    CUcontext ctx = nullptr;
    CUresult r = driver_.ctx_get_current(&ctx);
    if (r != CUDA_SUCCESS || !ctx) return {0, r == CUDA_SUCCESS ? CUDA_ERROR_INVALID_CONTEXT : r};
    std::unique_lock<std::mutex> hold;
    Lane* acquired = acquire_lane(ctx, request.direction, hold);
    if (!acquired) return {0, CUDA_SUCCESS};
    Lane& lane = *acquired;
    r = prepare(lane);
    if (r != CUDA_SUCCESS) return {0, r};
    // Host to device: the workers have work at once, so let them come up while the issuer
    // prepares. Device to host: they have none until the first DMA lands, so the first DMA is
    // enqueued before the wake-up's system call (device_to_host).
    if (request.direction == Direction::HostToDevice) lane.pool->wake();
    return request.direction == Direction::HostToDevice ? host_to_device(lane, request)
                                                        : device_to_host(lane, request);
  } catch (...) {
    return {0, CUDA_ERROR_UNKNOWN};
  }
}

namespace {

// Tracks how long the issuer has waited on a slot owned by another stream.
class StallClock {
 public:
  bool expired(const StagingSlot& slot, CUstream stream) {
    if (slot.dma_stream == stream) {
      started_ = false;
      return false;
    }
    auto now = std::chrono::steady_clock::now();
    if (!started_) {
      started_ = true;
      since_ = now;
    }
    return now - since_ > kForeignStallLimit;
  }
  void progress() { started_ = false; }

 private:
  bool started_ = false;
  std::chrono::steady_clock::time_point since_;
};

// Where one copy's time goes, logged at debug level (CMT_LOG=debug): when the first worker
// started (its wake-up latency), when the first and last DMA were enqueued or landed, how many
// units the issuer copied itself, and how long it spent inside the driver's enqueue calls.
class CopyTrace {
 public:
  using Clock = std::chrono::steady_clock;
  CopyTrace() : on_(log().should_log(spdlog::level::debug)), t0_(Clock::now()) {}
  std::int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0_).count();
  }
  void unit_started() {
    if (!on_) return;
    if (!WorkerPool::on_worker_thread()) {
      issuer_units_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    std::int64_t none = -1;
    if (first_worker_us_.load(std::memory_order_relaxed) == -1)
      first_worker_us_.compare_exchange_strong(none, now_us());
  }
  void mark(std::int64_t& at) {
    if (on_) at = now_us();
  }
  void mark_once(std::int64_t& at) {
    if (on_ && at < 0) at = now_us();
  }
  void dma_enqueued() {
    if (!on_) return;
    try {
      enqueued_us_.push_back(now_us());
    } catch (...) {  // a trace never stops a copy
    }
  }
  template <typename Call>
  CUresult time_driver(Call&& call) {
    if (!on_) return call();
    auto t = Clock::now();
    CUresult r = call();
    driver_us_ += std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count();
    return r;
  }
  void report(const char* direction, const CopyLayout& l) {
    if (!on_) return;
    CMT_LOG(debug,
            "{} {} KiB: {} pieces ({} ramp) x {} units; ready {} us, first worker {} us, "
            "first DMA {} us, last piece {} us, return {} us; issuer copied {} units; "
            "{} us in driver enqueue calls",
            direction, l.bytes >> 10, l.pieces, l.ramp, l.units_per_piece, ready_us,
            first_worker_us_.load(), first_dma_us, last_piece_us, now_us(), issuer_units_.load(),
            driver_us_);
  }
  // H2D only, at debug level: waits for the DMAs of pieces [first, end) still in the ring and
  // logs when each completed, to show how fast the DMAs out of the ring ran. This delays the
  // copy's return, so it is a diagnostic, never on at the default level.
  void report_dma_completions(StagingRing& ring, std::size_t first, std::size_t end) noexcept {
    if (!on_ || first >= end) return;
    try {
      log_dma_completions(ring, first, end);
    } catch (...) {  // a trace never fails a copy
    }
  }
  std::int64_t ready_us = -1, first_dma_us = -1, last_piece_us = -1, populated_us = -1;

 private:
  void log_dma_completions(StagingRing& ring, std::size_t first, std::size_t end) {
    std::string times;
    const auto give_up = Clock::now() + std::chrono::seconds(1);
    for (std::size_t p = first; p < end; ++p) {
      CUresult r;
      while ((r = ring.poll_idle(ring.slot(p))) == CUDA_ERROR_NOT_READY && Clock::now() < give_up) {
      }
      if (r != CUDA_SUCCESS) break;
      times += (times.empty() ? "" : " ") + std::to_string(now_us());
    }
    std::string enqueued;
    for (std::int64_t t : enqueued_us_)
      enqueued += (enqueued.empty() ? "" : " ") + std::to_string(t);
    CMT_LOG(debug, "H2D DMAs enqueued at (us): {}; those of pieces {}..{} completed by: {}",
            enqueued, first, end - 1, times);
  }

  const bool on_;
  const Clock::time_point t0_;
  std::atomic<std::int64_t> first_worker_us_{-1};
  std::atomic<unsigned> issuer_units_{0};
  std::int64_t driver_us_ = 0;
  std::vector<std::int64_t> enqueued_us_;
};

void copy_by(CopyMethod method, char* dst, const char* src, std::size_t bytes) {
  switch (method) {
    case CopyMethod::Streaming:
      return copy_streaming(dst, src, bytes);
    default:
      return copy_memcpy(dst, src, bytes);
  }
}

// Runs unit `u` of a copy: the slice of its piece that one worker copies. The worker that
// finishes a piece's last unit stamps the slot with the piece's ticket, for the issuer.
template <typename CopyFn>
void run_unit(const CopyLayout& l, StagingRing& ring, std::uint64_t base, std::size_t u,
              CopyFn&& copy_slice) {
  const std::size_t p = u / l.units_per_piece;
  const std::size_t unit = l.unit_length(p);
  const std::size_t begin = (u % l.units_per_piece) * unit;
  const std::size_t length = l.piece_length(p);
  StagingSlot& slot = ring.slot(p);
  if (begin < length)
    copy_slice(slot.data + begin, l.piece_offset(p) + begin, std::min(unit, length - begin));
  if (slot.units_done.fetch_add(1, std::memory_order_acq_rel) + 1 == l.units_per_piece) {
    slot.units_done.store(0, std::memory_order_relaxed);
    slot.ticket.store(base + p, std::memory_order_release);
  }
}

class StageIn final : public PieceTask {  // H2D: user buffer -> slot
 public:
  StageIn(const char* src, const CopyLayout& l, StagingRing& ring, std::uint64_t base,
          CopyMethod method, CopyTrace& trace)
      : src_(src), layout_(l), ring_(ring), base_(base), method_(method), trace_(trace) {}
  void run_piece(std::size_t u) override {
    trace_.unit_started();
    run_unit(layout_, ring_, base_, u, [this](char* staging, std::size_t off, std::size_t n) {
      copy_by(method_, staging, src_ + off, n);
    });
  }

 private:
  const char* src_;
  CopyLayout layout_;
  StagingRing& ring_;
  std::uint64_t base_;
  CopyMethod method_;
  CopyTrace& trace_;
};

class DrainOut final : public PieceTask {  // D2H: slot -> user buffer
 public:
  DrainOut(char* dst, const CopyLayout& l, StagingRing& ring, std::uint64_t base, CopyMethod method,
           CopyTrace& trace)
      : dst_(dst), layout_(l), ring_(ring), base_(base), method_(method), trace_(trace) {}
  void run_piece(std::size_t u) override {
    trace_.unit_started();
    run_unit(layout_, ring_, base_, u, [this](char* staging, std::size_t off, std::size_t n) {
      copy_by(method_, dst_ + off, staging, n);
    });
  }

 private:
  char* dst_;
  CopyLayout layout_;
  StagingRing& ring_;
  std::uint64_t base_;
  CopyMethod method_;
  CopyTrace& trace_;
};

class PopulateFresh final : public PieceTask {  // D2H, first: fault a fresh destination in
 public:
  explicit PopulateFresh(const FreshBlocks& blocks) : blocks_(blocks) {}
  void run_piece(std::size_t i) override {
    // One refusal (an old kernel) means all would be refused: stop asking.
    if (!refused_.load(std::memory_order_relaxed) && !populate_block(blocks_, i))
      refused_.store(true, std::memory_order_relaxed);
  }
  bool refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  FreshBlocks blocks_;
  std::atomic<bool> refused_{false};
};

// Records the slot's event after its DMA was enqueued. If that fails, the slot's DMA state is
// unknown: drain the stream so the memory is safe to reuse, or give the ring up.
CUresult record_dma(const DriverApi& driver, StagingRing& ring, StagingSlot& slot,
                    CUstream stream) {
  CUresult r = driver.event_record(slot.dma_done, stream);
  if (r == CUDA_SUCCESS) {
    slot.dma_pending = true;
    slot.dma_stream = stream;
    return r;
  }
  if (driver.stream_synchronize(stream) != CUDA_SUCCESS) ring.mark_broken();
  return r;
}

}  // namespace

CopyOutcome CopyEngine::host_to_device(Lane& lane, const CopyRequest& req) {
  StagingRing& ring = *lane.ring;
  WorkerPool& pool = *lane.pool;
  CopyTrace trace;
  if (req.synchronous) {
    // cudaMemcpy from pageable memory synchronizes the stream before it copies.
    CUresult r = driver_.stream_synchronize(req.stream);
    if (r != CUDA_SUCCESS) return {0, r};
  }
  trace.mark(trace.ready_us);
  const CopyLayout layout = plan_copy(req.bytes, pool.size() + 1, ring.slot_bytes(),
                                      lane.config.ramp, lane.config.chunk_bytes);
  const std::uint64_t base = lane.next_ticket;
  lane.next_ticket += layout.pieces;

  StageIn task(static_cast<const char*>(req.host), layout, ring, base,
               staging_method(lane.config.h2d_method, req.bytes), trace);
  pool.begin(&task);
  std::size_t published = 0, issued = 0;
  CUresult status = CUDA_SUCCESS;
  Backoff backoff;
  StallClock stall;
  while (issued < layout.pieces) {
    bool progress = false;
    // Hand workers every piece whose slot has no DMA in flight.
    while (published < layout.pieces && published < issued + ring.size()) {
      StagingSlot& slot = ring.slot(published);
      CUresult r = ring.poll_idle(slot);
      if (r == CUDA_ERROR_NOT_READY) {
        if (stall.expired(slot, req.stream)) goto stop;
        break;
      }
      if (r != CUDA_SUCCESS) {
        ring.mark_broken();
        status = r;
        goto stop;
      }
      stall.progress();
      pool.publish(++published * layout.units_per_piece);
      progress = true;
    }
    // Enqueue the next piece's DMA as soon as a worker has staged it.
    if (issued < published) {
      StagingSlot& slot = ring.slot(issued);
      if (slot.ticket.load(std::memory_order_acquire) == base + issued) {
        CUresult r = trace.time_driver([&] {
          return driver_.memcpy_htod_async(req.device + layout.piece_offset(issued), slot.data,
                                           layout.piece_length(issued), req.stream);
        });
        if (r != CUDA_SUCCESS) {
          status = r;
          goto stop;
        }
        r = trace.time_driver([&] { return record_dma(driver_, ring, slot, req.stream); });
        trace.mark_once(trace.first_dma_us);
        trace.dma_enqueued();
        ++issued;  // the DMA is enqueued either way; only its slot's bookkeeping failed
        if (r != CUDA_SUCCESS) {
          status = r;
          goto stop;
        }
        progress = true;
      }
    }
    if (progress || pool.help())  // nothing to issue: copy a unit instead of spinning
      backoff.reset();
    else
      backoff.pause();
  }
stop:
  trace.mark(trace.last_piece_us);
  pool.end();  // published pieces finish staging; nothing else touches the user's buffer after
  trace.report("H2D", layout);
  trace.report_dma_completions(ring, issued > ring.size() ? issued - ring.size() : 0, issued);
  return {layout.piece_offset(issued), status};
}

CopyOutcome CopyEngine::device_to_host(Lane& lane, const CopyRequest& req) {
  StagingRing& ring = *lane.ring;
  WorkerPool& pool = *lane.pool;
  const CopyLayout layout = plan_copy(req.bytes, pool.size() + 1, ring.slot_bytes(),
                                      lane.config.ramp, lane.config.chunk_bytes);
  const std::uint64_t base = lane.next_ticket;
  lane.next_ticket += layout.pieces;
  // Auto drains with streaming stores: the user's buffer is not read back soon, and fresh pages
  // of it need not be pulled into the cache first.
  const CopyMethod drain =
      lane.config.d2h_method == CopyMethod::Auto ? CopyMethod::Streaming : lane.config.d2h_method;
  CopyTrace trace;
  trace.mark(trace.ready_us);

  // A fresh destination is populated first, block by block on every thread, while the first
  // DMAs fill the ring; the drain starts once that is done (fresh_pages.h).
  FreshBlocks fresh;
  if (lane.config.fresh_pages != FreshPages::Off && req.bytes >= kFreshPagesFrom && can_populate())
    fresh = whole_blocks(req.host, req.bytes);
  if (!looks_fresh(fresh)) fresh = {};
  if (lane.config.fresh_pages == FreshPages::Huge) advise_huge_pages(fresh);
  PopulateFresh populate(fresh);
  DrainOut task(static_cast<char*>(req.host), layout, ring, base, drain, trace);
  bool populating = fresh.count > 0;
  pool.begin(populating ? static_cast<PieceTask*>(&populate) : &task);
  if (populating) pool.publish(fresh.count);
  std::size_t issued = 0, landed = 0;
  CUresult status = CUDA_SUCCESS;
  Backoff backoff;
  StallClock stall;
  // Ends the populate job, so that landed pieces can be drained.
  auto start_draining = [&] {
    pool.end();
    populating = false;
    trace.mark(trace.populated_us);
    pool.begin(&task);
    pool.publish(landed * layout.units_per_piece);
  };
  while (landed < layout.pieces || populating) {
    bool progress = false;
    // DMA into every slot that is free: its previous piece drained, no DMA in flight.
    while (issued < layout.pieces && issued < landed + ring.size()) {
      StagingSlot& slot = ring.slot(issued);
      if (issued >= ring.size() &&
          slot.ticket.load(std::memory_order_acquire) != base + issued - ring.size())
        break;
      CUresult r = ring.poll_idle(slot);
      if (r == CUDA_ERROR_NOT_READY) {
        if (stall.expired(slot, req.stream)) goto stop;
        break;
      }
      if (r != CUDA_SUCCESS) {
        ring.mark_broken();
        status = r;
        goto stop;
      }
      stall.progress();
      r = trace.time_driver([&] {
        return driver_.memcpy_dtoh_async(slot.data, req.device + layout.piece_offset(issued),
                                         layout.piece_length(issued), req.stream);
      });
      if (r != CUDA_SUCCESS) {
        status = r;
        goto stop;
      }
      r = trace.time_driver([&] { return record_dma(driver_, ring, slot, req.stream); });
      trace.mark_once(trace.first_dma_us);
      if (r != CUDA_SUCCESS) {
        status = r;
        goto stop;
      }
      // The first drain comes once this DMA lands (populating: there is work already).
      if (++issued == 1 && !populating) pool.wake();
      progress = true;
    }
    // Hand workers each piece whose DMA has landed, in order.
    if (landed < issued) {
      CUresult r = ring.poll_idle(ring.slot(landed));
      if (r == CUDA_SUCCESS) {
        ++landed;
        if (!populating) pool.publish(landed * layout.units_per_piece);
        if (landed == layout.pieces) trace.mark(trace.last_piece_us);
        progress = true;
      } else if (r != CUDA_ERROR_NOT_READY) {
        ring.mark_broken();
        status = r;
        goto stop;
      }
    }
    if (populating && pool.finished() == fresh.count) {
      start_draining();
      progress = true;
    }
    if (progress || pool.help())  // nothing to issue: copy a unit instead of spinning
      backoff.reset();
    else
      backoff.pause();
  }
stop:
  if (populating) start_draining();  // stopped early: the landed pieces still go to the user
  pool.end();                        // every landed piece is in the user's buffer when this returns
  trace.report("D2H", layout);
  if (fresh.count)
    CMT_LOG(debug, "D2H into a fresh destination: {} blocks of 2 MiB {} ({}), populated at {} us",
            fresh.count, populate.refused() ? "left to fault" : "populated",
            fresh_pages_name(lane.config.fresh_pages), trace.populated_us);
  return {layout.piece_offset(landed), status, fresh.count * kFreshBlock};
}

}  // namespace cmt
