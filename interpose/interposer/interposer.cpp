#include "interposer/interposer.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "common/host_files.h"
#include "common/log.h"
#include "common/output_file.h"
#include "common/release_abi.h"
#include "common/thread_context.h"
#include "config/profile.h"
#include "cuda/real_dl.h"
#include "engine/device/copy_engine.h"
#include "engine/device/copy_plan.h"
#include "engine/peer/peer_copier.h"
#include "engine/shared/gpu_locality.h"
#include "engine/shared/worker_pool.h"
#include "interposer/classify.h"
#include "interposer/host_leg.h"
#include "interposer/host_memory.h"
#include "interposer/hot_copy.h"
#include "interposer/page_map.h"
#include "interposer/recorder.h"
#include "interposer/register_cache.h"
#include "interposer/stats.h"
#include "interposer/stream_timer.h"
#include "interposer/trackable_memory.h"

extern "C" void __libc_free(void*);  // glibc's own free, below libcmt-release.so

namespace cmt {
namespace {

std::mutex& engine_mu() {
  static auto* mu = new std::mutex();  // leaked: usable from static destructors
  return *mu;
}

// fork(), the library's one rule for it: these handlers exist once cmt has been asked about a
// copy, that is once the process has used CUDA, which a forked child cannot. The child has no
// copy threads and cannot use the parent's CUDA state: it forwards every CUDA copy, so CUDA
// answers it as it would without cmt, and its host leg is disarmed, so libc makes its memcpy
// calls. Set whatever the parent was doing, an engine half built included, so no child builds its
// own. (The host leg is armed only through this object, so these handlers exist before it is.)
bool g_forked_child = false;
// The process's instance, for the child's handler: set before the handlers are registered, so a
// fork while instance() is still making it finds it here (instance()'s own guard would never
// open in the child).
std::atomic<Interposer*> g_process_instance{nullptr};

// The process's cache of hot-buffer registrations, for the release hooks' reports and fork.
std::atomic<RegisterCache*> g_register_cache{nullptr};
// register = auto's timer of copies on their streams (stream_timer.h), made with the cache.
std::atomic<StreamTimer*> g_stream_timer{nullptr};
std::atomic<StreamTimer*> g_recorder_timer{nullptr};  // the recorder's (time_recorded_copies)

// A stream timing's tag (stream_timer.h) under auto: the copy's bytes, whether it was made from a
// registration, and its direction.
std::uint64_t timing_tag(std::size_t bytes, bool hot, bool to_device) {
  return (static_cast<std::uint64_t>(bytes) << 2) | (hot ? 2u : 0u) | (to_device ? 1u : 0u);
}

// register = auto: the copy this thread's hook is making (open: inside a CopyCallScope), of a
// range the cache counted without registering it (take_hot_copy), whose loss copy_call_ended
// tells the cache; `timing`, its slot of the stream timer (-1: not timed on its stream).
struct PendingLoss {
  bool open = false;
  const void* host = nullptr;
  std::size_t bytes = 0;
  bool to_device = false;
  CUstream stream = nullptr;
  int timing = -1;
  std::chrono::steady_clock::time_point start;
};
thread_local PendingLoss t_pending_loss;

void before_fork() {
  engine_mu().lock();
  if (RegisterCache* cache = g_register_cache.load()) cache->fork_lock().lock();
}
void after_fork_parent() {
  if (RegisterCache* cache = g_register_cache.load()) cache->fork_lock().unlock();
  engine_mu().unlock();
}
void after_fork_child() {
  g_forked_child = true;
  // The child has none of the copy threads: libc copies, as without cmt.
  host_leg().forget_in_child();
  // What the child writes at exit is what it did itself.
  if (Interposer* self = g_process_instance.load(std::memory_order_acquire))
    self->start_stats_afresh();
  page_map_forget_in_child();  // the recorder's and the host leg's questions are the child's now
  Recorder::forget_in_child();
  if (RegisterCache* cache = g_register_cache.load()) {
    cache->forget_in_child();  // the child's pages are copies: the parent's registrations are not its
    cache->fork_lock().unlock();
  }
  engine_mu().unlock();
}

// Runs `work` on the process's cache of registrations, if there is one; nothing escapes.
template <typename Work>
void with_register_cache(Work work) noexcept {
  InsideCmt inside;
  try {
    if (RegisterCache* cache = g_register_cache.load(std::memory_order_acquire)) work(*cache);
  } catch (...) {
  }
}

// libcmt-release.so's reports (common/release_abi.h), before the call that releases the pages.
void report_pages_released(std::uintptr_t lo, std::uintptr_t hi) noexcept {
  with_register_cache([&](RegisterCache& cache) { cache.pages_released(lo, hi); });
}
void report_chunk_released(std::uintptr_t lo, std::uintptr_t hi) noexcept {
  with_register_cache([&](RegisterCache& cache) { cache.chunk_released(lo, hi); });
}
void report_all_released() noexcept {
  with_register_cache([](RegisterCache& cache) { cache.all_released(); });
}
bool report_chunk_freed(void* chunk, std::uintptr_t lo, std::uintptr_t hi) noexcept {
  bool later = false;
  with_register_cache([&](RegisterCache& cache) { later = cache.chunk_freed(chunk, lo, hi); });
  return later;
}
bool report_chunk_registered(std::uintptr_t lo, std::uintptr_t hi) noexcept {
  bool held = false;
  with_register_cache([&](RegisterCache& cache) { held = cache.frees_later(lo, hi); });
  return held;
}
const ReleaseAbi kReleaseAbi{kReleaseAbiVersion,  report_pages_released, report_chunk_released,
                             report_chunk_freed,  report_chunk_registered, report_all_released};

// register_max's default: a quarter of the machine's memory.
std::size_t default_register_max() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::size_t{1} << 32;
  return static_cast<std::size_t>(pages) / 4 * static_cast<std::size_t>(page);
}

// A forked child that offered no copy did not use CUDA (it cannot): it says nothing at exit, no
// statistics file and no summary, so that `cmt run -v` counts the processes that did.
bool silent_child(Interposer& self) {
  return g_forked_child && self.stats().offered_calls() == 0;
}

// Runs inside the program's exit: nothing may escape it (an exception there ends the process).
void write_stats_at_exit() noexcept {
  try {
    Interposer& self = Interposer::instance();
    if (self.config().stats_file.empty() || silent_child(self)) return;
    // One file per process of a tree (tuner/stats_files.h sums them); without %p the last wins.
    const std::string path = path_for_this_process(self.config().stats_file);
    std::string why;
    // Private to the user, replacing whatever is at the path, never following it.
    if (!write_output_file(path, self.stats().to_json(self.copy_threads_cpu_seconds()), &why, 0600))
      CMT_WARN_ONCE("CMT_STATS: cannot write '{}': {}", path, why);
  } catch (...) {
  }
}

// `cmt run -v` (or CMT_LOG=info) ends with what cmt did in the process.
void log_summary_at_exit() noexcept {
  try {
    Interposer& self = Interposer::instance();
    if (silent_child(self)) return;
    CMT_LOG(info, "at exit: {}", self.stats().summary(self.copy_threads_cpu_seconds()));
  } catch (...) {
  }
}

std::uint64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

CUdeviceptr as_device(const void* p) {
  return reinterpret_cast<CUdeviceptr>(p);
}

}  // namespace

Interposer& Interposer::instance() {
  static Interposer* self = new Interposer();
  return *self;
}

std::size_t Interposer::offer_copy(void* dst, const void* src, std::size_t bytes, int kind,
                                   CUstream stream, bool synchronous, Entry entry) noexcept {
  InsideCmt inside;  // cmt's own memcpy calls go to libc
  try {
    return instance().take_copy(dst, src, bytes, kind, stream, synchronous, entry);
  } catch (...) {
    return 0;
  }
}

std::size_t Interposer::offer_peer_copy(const PeerCall& call, Entry entry) noexcept {
  InsideCmt inside;
  try {
    return instance().take_peer_copy(call, entry);
  } catch (...) {
    return 0;
  }
}

void Interposer::time_loss(const void* host, std::size_t bytes, bool to_device,
                           CUstream stream) const {
  // register = auto: what this copy loses against a registered one counts, once the hook has
  // made it (copy_call_ended). Some are timed on their streams, which says what such copies lose.
  PendingLoss& pending = t_pending_loss;
  if (config_.register_mode != Register::Auto || !pending.open || pending.host) return;
  pending = {true, host, bytes, to_device, stream, -1, std::chrono::steady_clock::now()};
  StreamTimer* timer = g_stream_timer.load(std::memory_order_acquire);
  if (timer && register_cache_->costs().time_this(to_device, bytes))
    pending.timing = timer->begin(stream);
}

void Interposer::copy_call_began() noexcept {
  t_pending_loss.open = true;
}

void Interposer::copy_call_ended() noexcept {
  PendingLoss& pending = t_pending_loss;
  StreamTimer* timer = g_stream_timer.load(std::memory_order_acquire);
  if (!pending.host) {
    pending.open = false;
    if (timer && timer->waiting() && !g_forked_child) collect_timings(*timer);
    return;
  }
  const PendingLoss done = pending;
  pending = PendingLoss{};
  const auto call_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - done.start)
                           .count();
  InsideCmt inside;
  try {
    // A timing begun is always ended, or its slot would stay taken.
    if (timer && done.timing >= 0)
      timer->end(done.timing, done.stream, timing_tag(done.bytes, false, done.to_device));
    RegisterCache* cache = g_register_cache.load(std::memory_order_acquire);
    if (!cache) return;
    // What copies of its size and direction took on their streams; the call's own time until one
    // of them is timed (a pageable cudaMemcpyAsync's return is earlier than its end).
    const RegisterCosts& costs = cache->costs();
    const double expected = costs.expected_loss_ns(done.to_device, done.bytes);
    cache->add_loss(
        done.host, done.bytes,
        expected >= 0 ? expected : costs.lost_ns(done.bytes, static_cast<std::uint64_t>(call_ns)));
    if (timer && timer->waiting()) collect_timings(*timer);
  } catch (...) {
  }
}

void Interposer::collect_timings(StreamTimer& timer) noexcept {
  InsideCmt inside;
  try {
    RegisterCache* cache = g_register_cache.load(std::memory_order_acquire);
    if (!cache) return;
    timer.collect([cache](const StreamTimer::Timing& t) {
      const std::size_t bytes = static_cast<std::size_t>(t.tag >> 2);
      if (!bytes) return;  // a copy from a registration that failed
      if (t.tag & 2)
        cache->costs().hot_copied(bytes, t.ns);
      else
        cache->costs().staged_timed(t.tag & 1, bytes, t.ns);
    });
  } catch (...) {
  }
}

void Interposer::offer_batch(const BatchCall& batch, BatchRest* rest) noexcept {
  InsideCmt inside;
  try {
    instance().take_batch(batch, rest);
  } catch (...) {
    rest->untouched = true;  // the instance could not be built: CUDA gets the whole batch
  }
}

void Interposer::take_batch(const BatchCall& batch, BatchRest* rest) noexcept {
  // Most batches are of small copies (the batch API saves per-call costs): when all of them
  // together stay under the smallest copy cmt takes any way, they are CUDA's after one pass over
  // their sizes, with nothing allocated and no copy classified.
  const std::size_t smallest =
      std::min({config_.warm_threshold, config_.threshold, config_.d2h_warm_threshold,
                config_.d2h_threshold, config_.peer_threshold});
  std::size_t total = 0;
  for (std::size_t i = 0; i < batch.count && total < smallest; ++i)
    total = batch.sizes[i] >= smallest - total ? smallest : total + batch.sizes[i];
  if (total < smallest) {
    stats_->forwarded(ForwardReason::BelowThreshold, batch.count);
    rest->untouched = true;
    return;
  }
  try {
    rest->reserve(batch.count);  // nothing allocates once a copy is made
  } catch (...) {
    rest->untouched = true;
    return;
  }
  const CUstream stream = batch_stream(batch);
  // A source read in stream order waits for the work queued before the batch, once: after a
  // host-to-device copy that waited for the stream, or any device-to-host copy (whose DMAs ran
  // after that work and have landed), the stream holds only this batch's own copies, which have no
  // order among them. A GPU-to-GPU copy returns once enqueued: it waited for nothing.
  bool waited = false;
  split_batch(
      batch, rest,
      [&](CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, bool source_in_stream_order) {
        std::optional<Direction> taken;
        const std::size_t done =
            take_copy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dst)),
                     reinterpret_cast<const void*>(static_cast<std::uintptr_t>(src)), bytes,
                     kDefault, stream, source_in_stream_order && !waited, Entry::Batch, &taken);
        if (done > 0 && taken && (*taken == Direction::DeviceToHost || source_in_stream_order))
          waited = true;
        return done;
      });
}

void Interposer::configure() noexcept {
  InsideCmt inside;
  try {
    (void)instance();
  } catch (...) {
  }
}

void Interposer::host_memory_added(void* p, std::size_t bytes) noexcept {
  InsideCmt inside;
  try {
    // Recorded with the context it was made in, which frees it (or drops it) when it ends.
    CUcontext ctx = nullptr;
    const DriverApi* driver = real_driver();
    if (!driver || driver->ctx_get_current(&ctx) != CUDA_SUCCESS) ctx = nullptr;
    if (!cuda_host_memory().add(p, bytes, ctx))
      CMT_WARN_ONCE(
          "more than {} CUDA host allocations at once; copies into the others run on "
          "one thread",
          HostMemoryMap::kCapacity);
    instance().arm_host_copies();
  } catch (...) {
  }
}

CUcontext Interposer::active_primary_context(CUdevice dev) noexcept {
  InsideCmt inside;
  try {
    const DriverApi* driver = real_driver();
    return driver ? active_primary_context_of(*driver, dev) : nullptr;
  } catch (...) {
    return nullptr;
  }
}

void Interposer::context_ends(CUcontext ctx, bool alive, const char* how) noexcept {
  InsideCmt inside;
  try {
    if (g_forked_child) return;  // nothing of cmt's is in a child's contexts
    Interposer& self = instance();
    self.contexts_.forget(ctx);  // seen: the next context under this handle is met as new
    self.let_go_of_context(ctx, alive, how);
  } catch (...) {
  }
}

void Interposer::let_go_of_context(CUcontext ctx, bool alive, const char* how) {
  CopyEngine* engine = nullptr;
  {
    std::lock_guard<std::mutex> lk(engine_mu());
    engine = engine_;
  }
  const unsigned lanes = engine ? engine->forget_context(ctx, alive) : 0;
  PeerCopier* peer = peer_copier_.load(std::memory_order_acquire);
  const unsigned peer_lanes = peer ? peer->forget_context(ctx, alive) : 0;
  std::size_t registrations = 0;
  with_register_cache([&](RegisterCache& cache) {
    registrations = cache.forget_context(ctx, alive);
    if (edge_scratch_) edge_scratch_->forget_context(ctx);
    if (beside_scratch_) beside_scratch_->forget_context(ctx);
  });
  for (StreamTimer* timer : {g_stream_timer.load(), g_recorder_timer.load()})
    if (timer) timer->forget_context(ctx, alive);
  const std::size_t records = cuda_host_memory().forget_context(ctx);
  CMT_LOG(info,
          "context {} ends ({}): cmt let go of {} staging lanes, {} peer lanes, {} hot-buffer "
          "registrations and {} records of CUDA host memory made in it",
          static_cast<void*>(ctx), how, lanes, peer_lanes, registrations, records);
}

bool Interposer::context_goes_on(CUcontext ctx) noexcept {
  unsigned long long id = 0;
  if (!ctx || !driver_->ctx_get_id) return true;  // a driver before CUDA 12.0: unwatched
  // A handle the driver no longer knows: CUDA's call answers for it.
  const CUresult r = driver_->ctx_get_id(ctx, &id);
  try {
    if (r != CUDA_SUCCESS || id == 0 || id == ~0ull) {
      CMT_WARN_ONCE("the driver gave no id for context {} ({}); copies in it are CUDA's",
                    static_cast<void*>(ctx), cuda_error_text(*driver_, r));
      return false;
    }
    switch (contexts_.check(ctx, id)) {
      case ContextWatch::Verdict::Known:
      case ContextWatch::Verdict::Unwatched:
        return true;
      case ContextWatch::Verdict::Unsure:
        return false;
      case ContextWatch::Verdict::Ended:
        break;
    }
    CMT_WARN_ONCE(
        "context {} ended where cmt did not see it (its handle now names context id {}); cmt "
        "let go of what it held in the old one",
        static_cast<void*>(ctx), id);
    stats_->unseen_context_end();
    try {
      // Dead already: its handles are dropped untouched (one in use by a copy is leaked).
      let_go_of_context(ctx, false, "an end cmt did not see, found at a copy");
    } catch (...) {  // no memory for its log line: what could be let go was
    }
    contexts_.settle(ctx, id);
    return true;
  } catch (...) {  // no memory for a warning: this copy is CUDA's
    return false;
  }
}

bool Interposer::current_context_goes_on() noexcept {
  CUcontext ctx = nullptr;
  return driver_->ctx_get_current(&ctx) == CUDA_SUCCESS && context_goes_on(ctx);
}

void Interposer::host_memory_removed(void* p) noexcept {
  try {
    cuda_host_memory().remove(p);  // takes the map's writer lock
  } catch (...) {
  }
}

void Interposer::host_memory_registering(void* p, std::size_t bytes) noexcept {
  hand_back_to_cuda(p, bytes);
}

void Interposer::hand_back_to_cuda(const void* p, std::size_t bytes) noexcept {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  if (!p || bytes == 0) return;
  const std::uintptr_t hi = bytes > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + bytes;
  with_register_cache([&](RegisterCache& cache) { cache.hand_back(lo, hi); });
}

bool Interposer::registered_by_cmt(const void* p) noexcept {
  bool registered = false;
  if (p) with_register_cache([&](RegisterCache& cache) { registered = cache.touches(p, 1); });
  return registered;
}

void Interposer::arm_host_copies() {
  if (config_.disable ||
      (config_.host_copy == HostCopy::Off && config_.host_fill == HostFill::Off) ||
      g_forked_child || host_leg().copier())
    return;
  // No threads for hooks that are not there (libcmt.so preloaded alone).
  if (!host_leg().hooks_loaded()) return;
  const DriverApi* driver = real_driver();
  const GpuLocality where =
      gpu_locality(driver ? current_gpu_bus_id(*driver) : "", config_.gpu_cores);
  const unsigned threads =
      config_.threads ? config_.threads : auto_threads(usable_cpus(where.cpus.size()));
  arm_host_leg(config_, threads, where.cpus);
}

Interposer::Interposer() {
  // Precedence: environment > CMT_PROFILE > the user's profile for this machine > built-in
  // defaults. A bad profile is reported and ignored as a whole; a bad variable keeps its default.
  LoadedConfiguration loaded = load_configuration("", read_fingerprint());
  cap_threads(loaded.config, allowed_cpus().size(), &loaded.profile.warnings, process_cpu_quota());
  config_ = loaded.config;
  set_log_level(config_.log_level);
  for (const std::string& e : loaded.profile.errors) CMT_LOG(warn, "{} (profile ignored)", e);
  for (const std::string& w : loaded.profile.warnings) CMT_LOG(warn, "{}", w);
  for (const std::string& e : loaded.env_errors) CMT_LOG(warn, "{}", e);
  if (!loaded.shared_profile.empty())
    CMT_LOG(info, "using the shared profile {} ({})", loaded.shared_profile, loaded.shared_match);
  if (const std::optional<CpuQuota>& quota = process_cpu_quota())
    CMT_LOG(info, "CPU quota {}: copy threads sized for {} CPU(s)", describe(*quota),
            usable_cpus(allowed_cpus().size()));
  stats_ = new Stats();
  warm_gate_.set_spin(std::chrono::microseconds(config_.spin_us));
  g_process_instance.store(this, std::memory_order_release);
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  if (!config_.stats_file.empty()) std::atexit(write_stats_at_exit);
  Recorder::start(config_.record_file);
  if (Recorder::started()) time_recorded_copies();
  if (config_.log_level == "info" || config_.log_level == "debug") std::atexit(log_summary_at_exit);
  CMT_LOG(debug, "configuration:\n{}", describe(config_));
  // Every large memcpy (or file read) from now on, not only those into CUDA host memory; and
  // large memsets into new memory (or all), which need no CUDA host memory to be worth taking.
  if (config_.host_copy == HostCopy::All || config_.host_reads == HostReads::All ||
      config_.host_fill != HostFill::Off)
    arm_host_copies();
  if (config_.register_mode != Register::Off && !config_.disable) build_register_cache();
}

void Interposer::time_recorded_copies() {
  std::lock_guard<std::mutex> lk(engine_mu());
  if (!load_driver()) return;
  // Never destroyed, like this object: hooks may record at exit.
  auto* timer = new StreamTimer(*driver_, kRecordedTimings, true);
  g_recorder_timer.store(timer, std::memory_order_release);
  Recorder::time_on_streams(timer);
}

void Interposer::build_register_cache() {
  using AttachFn = const ReleaseLibrary* (*)(const ReleaseAbi*) noexcept;
  auto attach = reinterpret_cast<AttachFn>(real_dlsym(RTLD_DEFAULT, kReleaseLibraryAttachSymbol));
  const ReleaseLibrary* library = attach ? attach(&kReleaseAbi) : nullptr;
  if (!library || library->version != kReleaseAbiVersion) {
    CMT_LOG(warn, "hot buffers (register = hot or auto) need libcmt-release.so preloaded (cmt "
                  "run preloads it): they stay staged");
    return;
  }
  if (!library->glibc_malloc) {
    CMT_LOG(warn, "hot buffers: the malloc in this process is not glibc's, whose chunks cmt can "
                  "follow: they stay staged");
    return;
  }
  std::lock_guard<std::mutex> lk(engine_mu());
  if (!load_driver()) return;
  RegisterSettings settings;
  settings.after = config_.register_after;
  settings.paid = config_.register_mode == Register::Auto;
  settings.from = config_.register_from;
  settings.max_bytes = config_.register_max ? config_.register_max : default_register_max();
  auto* cache = new RegisterCache(  // leaked, like this object: hooks may report at exit
      *driver_, settings,
      [](const void* p, std::size_t bytes) { return trackable_range(p, bytes, true); },
      [watch = library->watch](std::uintptr_t lo, std::uintptr_t hi, std::size_t smallest) {
        watch(lo, hi, smallest);
      });
  // Frees of chunks holding registrations finished on a thread of the cache's: glibc's own free,
  // the one below libcmt-release.so (library->glibc_malloc).
  if (config_.register_free_later) cache->free_later(&__libc_free, true);
  use_register_cache(cache);
  if (settings.paid) g_stream_timer.store(new StreamTimer(*driver_), std::memory_order_release);
  g_register_cache.store(cache, std::memory_order_release);
}

void Interposer::use_register_cache(RegisterCache* cache) {
  // Leaked, like the cache; their pinned memory is made at the first copy that needs it. The ends
  // of copies from registrations take two pages a slot; small copies beside registrations up to
  // register_from (at most 1 MiB; larger ones are handed back): 16 x 64 KiB by default.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  if (!edge_scratch_) edge_scratch_ = new PinnedScratch(*driver_, 2 * page, 64);
  if (!beside_scratch_)
    beside_scratch_ = new PinnedScratch(
        *driver_, std::min<std::size_t>(std::max<std::size_t>(config_.register_from, 1), 1u << 20),
        16);
  register_cache_ = cache;
  stats_->set_register_cache(cache);
}

void Interposer::start_stats_afresh() {
  try {
    Stats* fresh = new Stats();
    fresh->set_register_cache(register_cache_);
    stats_ = fresh;
  } catch (...) {  // no memory: the parent's counts stay (a child that cannot allocate ends soon)
  }
}

bool Interposer::maybe_hot(const void* dst, const void* src, std::size_t bytes, int kind) const {
  if (!register_cache_ || kind == kHostToHost || kind == kDeviceToDevice) return false;
  if (bytes >= config_.register_from) return true;
  return (kind != kDeviceToHost && register_cache_->touches(src, bytes)) ||
         (kind != kHostToDevice && register_cache_->touches(dst, bytes));
}

std::size_t Interposer::take_hot_copy(void* dst, const void* src, std::size_t bytes, int kind,
                                      CUstream stream, Entry entry,
                                      std::optional<Direction>* taken) {
  if (g_forked_child || !engine()) return 0;
  // Before the cache is asked: a registration of a context that ended unseen is dead. Not here,
  // the engine's path asks again and forwards.
  if (!current_context_goes_on()) return 0;
  // Not a copy cmt makes from a registration: CUDA must see the memory as it would without cmt.
  auto not_hot = [&] {
    for (const void* side : {static_cast<const void*>(dst), src}) {
      const auto lo = reinterpret_cast<std::uintptr_t>(side);
      register_cache_->hand_back(lo, bytes > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + bytes);
    }
    return std::size_t{0};
  };
  // Where the call says which side is the host's: a copy from a registration goes straight to the
  // DMA with no pointer queries (CUDA checks the device side itself; a copy it refuses is then
  // CUDA's, unregistered); one that will neither find nor make a registration is only counted.
  const void* host = kind == kHostToDevice ? src : kind == kDeviceToHost ? dst : nullptr;
  if (host) {
    // The copy as the hot path makes it: not while the stream is captured (it waits).
    auto direct = [&](CopyRequest* r) {
      CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
      if (driver_->stream_is_capturing(stream, &capture) != CUDA_SUCCESS ||
          capture != CU_STREAM_CAPTURE_STATUS_NONE)
        return false;
      r->direction = kind == kHostToDevice ? Direction::HostToDevice : Direction::DeviceToHost;
      r->host = const_cast<void*>(host);
      r->device = as_device(kind == kHostToDevice ? dst : src);
      r->bytes = bytes;
      r->stream = stream;
      return true;
    };
    CopyRequest r;
    if (RegisterCache::Use use = register_cache_->find(host, bytes)) {
      const auto pages = use.pages();
      if (direct(&r))
        if (const std::size_t done = run_hot_copy(r, &pages, entry, taken)) return done;
      use = RegisterCache::Use();  // not held while its registration is dropped
      return not_hot();
    }
    // Too small to be a candidate, yet on a page cmt registered (why maybe_hot let it in): made
    // through pinned scratch where it fits, so that its neighbour keeps its registration.
    if (bytes < config_.register_from) {
      if (bytes <= beside_scratch_->slot_bytes() && direct(&r))
        if (const std::size_t done = run_hot_copy(r, nullptr, entry, taken)) return done;
      return not_hot();
    }
    if (!register_cache_->due(host, bytes)) {
      register_cache_->count(host, bytes);
      time_loss(host, bytes, kind == kHostToDevice, stream);
      return not_hot();
    }
  }
  CopyDecision d = classify_copy(*driver_, dst, src, bytes, kind, stream, Thresholds{1, 1},
                                 register_cache_);
  RegisterCache::Use use;
  if (d.taken()) {
    use = register_cache_->offer(d.request.host, bytes);
    if (!use)  // counted by offer, not registered
      time_loss(d.request.host, bytes, d.request.direction == Direction::HostToDevice, stream);
  }
  if (!use) return not_hot();
  const auto pages = use.pages();
  const std::size_t done = run_hot_copy(d.request, &pages, entry, taken);
  if (done) return done;
  use = RegisterCache::Use();
  return not_hot();
}

std::size_t Interposer::run_hot_copy(const CopyRequest& r,
                                     const std::pair<std::uintptr_t, std::uintptr_t>* pages,
                                     Entry entry, std::optional<Direction>* taken) {
  const auto t0 = std::chrono::steady_clock::now();
  stats_->copy_started(r.direction, steady_ns(t0));
  const bool to_device = r.direction == Direction::HostToDevice;
  // Under auto, some copies from registrations are timed on their streams, as the copies not made
  // from one are (time_loss), so that the two are weighed alike.
  StreamTimer* timer = pages ? g_stream_timer.load(std::memory_order_acquire) : nullptr;
  const int timing = timer && register_cache_->costs().time_this(to_device, r.bytes, true)
                         ? timer->begin(r.stream)
                         : -1;
  CUresult status;
  {
    RelaxedCaptureMode relaxed(*driver_);
    status = pages ? copy_registered(*driver_, r, pages->first, pages->second, *edge_scratch_)
                   : copy_beside_registered(*driver_, r, *beside_scratch_);
  }
  if (timing >= 0)
    timer->end(timing, r.stream, timing_tag(status == CUDA_SUCCESS ? r.bytes : 0, true, to_device));
  const auto t1 = std::chrono::steady_clock::now();
  stats_->copy_ended(r.direction, steady_ns(t1));
  if (status != CUDA_SUCCESS) {
    // CUDA makes the copy again (the same bytes, from pageable memory again: the caller drops the
    // registration) and reports the error as it would have.
    stats_->forwarded(ForwardReason::EngineUnavailable);
    CMT_WARN_ONCE("a copy from a registered hot buffer failed ({}); forwarding it",
                  cuda_error_text(*driver_, status));
    return 0;
  }
  stats_->taken(r.direction, entry, r.bytes,
                static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  pages ? stats_->hot(r.bytes) : stats_->beside_hot(r.bytes);
  // Without a timer on the streams (register = hot), the call's time says what such copies take.
  if (pages && !timer)
    register_cache_->hot_copied(
        r.bytes, static_cast<std::uint64_t>(
                     std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  note_outcome("hot", r.direction == Direction::HostToDevice ? "h2d" : "d2h");  // for the record
  note_host(r.host);
  if (taken) *taken = r.direction;
  return r.bytes;
}

Interposer::Interposer(const DriverApi* driver, const Config& config)
    : config_(config), driver_(driver), driver_loaded_(true), stats_(new Stats()) {
  warm_gate_.set_spin(std::chrono::microseconds(config_.spin_us));
}

bool Interposer::load_driver() {
  if (!driver_loaded_) {
    driver_ = real_driver();
    driver_loaded_ = true;
    if (!driver_) CMT_WARN_ONCE("the CUDA driver could not be loaded; cmt forwards every copy");
  }
  return driver_ != nullptr;
}

CopyEngine* Interposer::engine() {
  std::lock_guard<std::mutex> lk(engine_mu());
  if (!engine_ && load_driver()) {
    engine_ = new CopyEngine(*driver_, config_);  // leaked on purpose, like this object
  }
  return engine_;
}

double Interposer::copy_threads_cpu_seconds() {
  if (g_forked_child) return -1;
  double total = 0;
  {
    std::lock_guard<std::mutex> lk(engine_mu());
    if (engine_) total += engine_->copy_threads_cpu_seconds();
  }
  if (const HostCopier* copier = host_leg().copier()) total += copier->cpu_seconds();
  return total;
}

PeerCopier* Interposer::peer_copier() {
  if (PeerCopier* built = peer_copier_.load(std::memory_order_acquire)) return built;
  std::lock_guard<std::mutex> lk(engine_mu());
  if (!peer_copier_.load(std::memory_order_relaxed) && load_driver()) {
    // With one GPU no copy can be between two: device-to-device copies are forwarded without a
    // driver call (programs make many within one GPU). Asked once: CUDA's count does not change.
    int count = 0;
    if (driver_->device_get_count(&count) != CUDA_SUCCESS) return nullptr;  // asked again later
    gpu_count_.store(count);
    if (count < 2) return nullptr;
    peer_copier_.store(new PeerCopier(*driver_), std::memory_order_release);  // leaked too
  }
  return peer_copier_.load(std::memory_order_relaxed);
}

std::size_t Interposer::take_peer_copy(const PeerCall& call, Entry entry) noexcept {
  try {
    if (config_.disable || !config_.peer || t_thread.opted_out) {
      stats_->forwarded(ForwardReason::Disabled);
      return 0;
    }
    if (call.bytes < config_.peer_threshold) {
      stats_->forwarded(ForwardReason::BelowThreshold);
      return 0;
    }
    if (g_forked_child) {
      stats_->forwarded(ForwardReason::ForkedChild);
      return 0;
    }
    const int gpus = gpu_count_.load(std::memory_order_relaxed);
    PeerCopier* copier = gpus == -1 || gpus >= 2 ? peer_copier() : nullptr;
    if (!copier) {
      const int known = gpu_count_.load(std::memory_order_relaxed);
      stats_->forwarded(known >= 0 && known < 2 ? ForwardReason::SameGpu
                                                : ForwardReason::EngineUnavailable);
      return 0;
    }
    PeerDecision d = classify_peer_copy(*driver_, call, config_.peer_threshold);
    if (d.taken() && !(context_goes_on(d.request.src_ctx) && context_goes_on(d.request.dst_ctx)))
      d.reason = ForwardReason::ContextUnsure;
    if (!d.taken()) {
      stats_->forwarded(d.reason);
      return 0;
    }
    const auto t0 = std::chrono::steady_clock::now();
    PeerOutcome out = copier->copy(d.request);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    if (out.bytes_done == 0) {
      stats_->forwarded(ForwardReason::EngineUnavailable);
      CMT_WARN_ONCE("a GPU-to-GPU copy through the host could not start ({}); forwarding it",
                    cuda_error_text(*driver_, out.status));
      return 0;
    }
    stats_->taken_peer(entry, out.bytes_done, static_cast<std::uint64_t>(ns));
    if (out.bytes_done < call.bytes) {
      stats_->partial();
      CMT_WARN_ONCE("a GPU-to-GPU copy stopped after {} of {} bytes ({}); CUDA finishes it",
                    out.bytes_done, call.bytes, cuda_error_text(*driver_, out.status));
    }
    return out.bytes_done;
  } catch (...) {
    return 0;
  }
}

std::size_t Interposer::take_copy(void* dst, const void* src, std::size_t bytes, int kind,
                                 CUstream stream, bool synchronous, Entry entry,
                                 std::optional<Direction>* taken) noexcept {
  try {
    // A batch's device-to-device copy is ordered on the batch's stream (batch_copy.h).
    const bool peer_synchronous = synchronous && entry != Entry::Batch;
    if (kind == kDeviceToDevice)
      return take_peer_copy(
          PeerCall::of(as_device(dst), as_device(src), bytes, stream, peer_synchronous), entry);
    if (config_.disable || t_thread.opted_out) {
      stats_->forwarded(ForwardReason::Disabled);
      return 0;
    }
    if (maybe_hot(dst, src, bytes, kind))
      if (const std::size_t done = take_hot_copy(dst, src, bytes, kind, stream, entry, taken))
        return done;
    // Each way, copies from `always` up are taken; from `lowest` up only while the copy threads
    // are awake (warm_gate.h).
    const Thresholds always{config_.threshold, config_.d2h_threshold};
    const Thresholds lowest{std::min(config_.warm_threshold, config_.threshold),
                            std::min(config_.d2h_warm_threshold, config_.d2h_threshold)};
    if (bytes < lowest.smallest()) {
      stats_->forwarded(ForwardReason::BelowThreshold);
      return 0;
    }
    // Under both thresholds it is a warm copy whichever way it goes: asked before the driver is,
    // so that one forwarded while the threads sleep costs no driver calls.
    bool gate_asked = false;
    if (bytes < always.smallest()) {
      if (!warm_gate_.admit(WarmGate::now_ns())) {
        stats_->forwarded(ForwardReason::Asleep);
        return 0;
      }
      gate_asked = true;
    }
    if (g_forked_child) {
      stats_->forwarded(ForwardReason::ForkedChild);
      return 0;
    }
    CopyEngine* eng = engine();
    if (!eng) {
      stats_->forwarded(ForwardReason::EngineUnavailable);
      return 0;
    }
    CopyDecision d = classify_copy(*driver_, dst, src, bytes, kind, stream, lowest);
    if (d.for_peer_path) {  // cuMemcpy, cudaMemcpyDefault between two device pointers
      if (gate_asked) warm_gate_.not_taken();
      return take_peer_copy(
          PeerCall::of(as_device(dst), as_device(src), bytes, stream, peer_synchronous), entry);
    }
    if (!d.taken() || !current_context_goes_on()) {
      if (gate_asked) warm_gate_.not_taken();
      stats_->forwarded(d.taken() ? ForwardReason::ContextUnsure : d.reason);
      return 0;
    }
    const bool warm = bytes < (d.request.direction == Direction::HostToDevice ? always.h2d
                                                                               : always.d2h);
    if (warm && !gate_asked && !warm_gate_.admit(WarmGate::now_ns())) {
      stats_->forwarded(ForwardReason::Asleep);
      return 0;
    }
    d.request.synchronous = synchronous;
    // A warm copy gains too little to wait for a lane another thread's copy holds.
    d.request.no_wait = warm;
    auto t0 = std::chrono::steady_clock::now();
    stats_->copy_started(d.request.direction, steady_ns(t0));
    CopyOutcome out = eng->copy(d.request);
    const auto t1 = std::chrono::steady_clock::now();
    stats_->copy_ended(d.request.direction, steady_ns(t1));
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    if (out.bytes_done > 0)
      warm_gate_.copied(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count(),
          out.threads_asleep_after  ? 0
          : out.threads_sleep_after ? JobGaps::kBridge
                                    : -1);
    if (out.bytes_done == 0) {
      stats_->forwarded(warm && out.status == CUDA_SUCCESS ? ForwardReason::LanesBusy
                                                          : ForwardReason::EngineUnavailable);
      if (out.status != CUDA_SUCCESS)
        CMT_WARN_ONCE("the engine could not start a copy ({}); forwarding it",
                      cuda_error_text(*driver_, out.status));
      return 0;
    }
    stats_->taken(d.request.direction, entry, out.bytes_done, static_cast<std::uint64_t>(ns));
    note_engine(out.lane, out.lane_built, out.first_dma_ns, out.lane_wait_ns);
    note_host(d.request.host);
    if (taken) *taken = d.request.direction;
    if (out.fresh_bytes) stats_->fresh(out.fresh_bytes);
    if (out.bytes_done < bytes) {
      stats_->partial();
      CMT_WARN_ONCE("a copy stopped after {} of {} bytes ({}); CUDA finishes it", out.bytes_done,
                    bytes,
                    out.status == CUDA_SUCCESS
                        ? std::string("a staging buffer was held by another stream's DMA")
                        : cuda_error_text(*driver_, out.status));
    }
    return out.bytes_done;
  } catch (...) {
    return 0;
  }
}

}  // namespace cmt
