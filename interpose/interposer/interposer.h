// The state libcmt.so keeps inside a host process: configuration read once from CMT_*, the engine
// (built on the first copy worth taking), statistics, and fork/exit handling. Hooks ask it to
// take a copy; it answers how many leading bytes it handled, and the hook forwards the rest.
// Nothing here throws, exits or aborts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "config/options.h"
#include "cuda/driver_api.h"
#include "interposer/batch_copy.h"
#include "interposer/classify.h"
#include "interposer/context_watch.h"
#include "interposer/stats.h"
#include "interposer/warm_gate.h"

namespace cmt {

class Interposer {
 public:
  // The process-wide instance. It is never destroyed: hooks may run from the application's
  // static destructors, after the CUDA driver is gone.
  static Interposer& instance();

  // What a hook calls: the instance's take_copy, except that nothing (not even building the
  // instance) can throw past it. Returns 0 on any failure: forward the whole call.
  static std::size_t offer_copy(void* dst, const void* src, std::size_t bytes, int kind,
                                CUstream stream, bool synchronous, Entry entry) noexcept;
  // The same for a copy between two GPUs that names its contexts or devices (cuMemcpyPeer*,
  // cudaMemcpyPeer*, whose synchronous forms pass CU_STREAM_LEGACY or _PER_THREAD).
  static std::size_t offer_peer_copy(const PeerCall& call, Entry entry) noexcept;
  // A batch of copies (batch_copy.h): each copy offered as take_copy would take it, on the batch's
  // stream, and `rest` filled with what CUDA must still copy (left untouched if anything fails
  // before cmt makes a copy). Never throws.
  static void offer_batch(const BatchCall& batch, BatchRest* rest) noexcept;
  // A hook's copy call begins and returns (CopyCallScope, held around its offer and its forward):
  // with register = auto, what a copy of a range not yet registered lost against a registered
  // one is then told to the cache. A thread-local store and load otherwise. Never throw.
  static void copy_call_began() noexcept;
  static void copy_call_ended() noexcept;
  // Reads the configuration now, if no copy has yet (it sets the log level); never throws.
  static void configure() noexcept;
  // CUDA host memory handed out or registered ([p, p + bytes)), and freed or unregistered: what
  // the host-memory hooks report after the real call succeeded. The first one arms the host
  // leg (host_leg.h), unless host_copy is off. Never throw.
  static void host_memory_added(void* p, std::size_t bytes) noexcept;
  static void host_memory_removed(void* p) noexcept;
  // The program is about to register [p, p + bytes) itself: cmt's own registrations of hot
  // buffers on those pages go first, or CUDA would refuse the program's. Never throws.
  static void host_memory_registering(void* p, std::size_t bytes) noexcept;
  // A copy cmt leaves to CUDA (2D, 3D, arrays: structured_copy.h) is about to use host bytes
  // [p, p + bytes): cmt's registrations on those pages go first, so that CUDA takes the memory
  // as pageable, as it would without cmt. Never throws; nothing to do with hot buffers off.
  static void hand_back_to_cuda(const void* p, std::size_t bytes) noexcept;
  // The primary context of `dev` while it is active, else nullptr (the context-end hooks ask
  // before and after a release). Never throws.
  static CUcontext active_primary_context(CUdevice dev) noexcept;
  // Context `ctx` ends, by the call `how` (cuCtxDestroy, a primary context's reset or last
  // release): the engine's lanes in it, the peer lanes that name it, the hot buffers registered
  // in it, the pinned scratch allocated in it and the records of CUDA host memory made in it are
  // let go, so that nothing of it is used again, through a handle the driver may give to a new
  // object included. `alive`: called before the driver destroys it, so cmt's resources are freed
  // in it; else after, with its handles dropped untouched. Never throws.
  static void context_ends(CUcontext ctx, bool alive, const char* how) noexcept;
  // Whether `p` lies on a page cmt registered (hot buffers): CUDA's pointer queries about it are
  // then answered for pageable memory (pageable_stand_in.h). Never throws; false with hot
  // buffers off.
  static bool registered_by_cmt(const void* p) noexcept;

  // Tries to run the copy through the engine. Returns the number of leading bytes handled (0:
  // forward the whole call untouched). `stream` must be explicit (legacy or per-thread handle
  // for the default stream).
  // `synchronous`: a host-to-device copy waits for the stream before it reads its source (as
  // cudaMemcpy; for a batch's copy, a source read in stream order). A device-to-device one of a
  // batch is asynchronous on the batch's stream whatever its source order.
  // `taken`, if given, is set to the direction of a host <-> device copy cmt took part of.
  std::size_t take_copy(void* dst, const void* src, std::size_t bytes, int kind, CUstream stream,
                       bool synchronous, Entry entry,
                       std::optional<Direction>* taken = nullptr) noexcept;

  // offer_batch's work, on this instance.
  void take_batch(const BatchCall& batch, BatchRest* rest) noexcept;

  // A device-to-device copy: through the host if its GPUs have no peer access (engine/peer/peer_copier.h).
  // Returns the number of leading bytes handled, as take_copy.
  std::size_t take_peer_copy(const PeerCall& call, Entry entry) noexcept;

  // Hot buffers (register = hot): the cache of cmt's registrations (register_cache.h), built by
  // the instance where libcmt-release.so reports releases. Tests hand one in; not owned.
  void use_register_cache(class RegisterCache* cache);

  const Config& config() const { return config_; }
  Stats& stats() { return *stats_; }
  // In a forked child (pthread_atfork, one thread): statistics of its own, from zero, so that a
  // child ending with exit() does not write the parent's counts again into a file of its own
  // (`cmt run -v` sums one file per process). The parent's are left behind, not freed: one of
  // their locks may have been held by a thread the child does not have.
  void start_stats_afresh();
  // The CPU time cmt's copy threads have used so far (the engine's, the host leg's), in seconds;
  // -1 (not known) in a forked child, which has none of them.
  double copy_threads_cpu_seconds();

  // Builds an instance over a given driver (tests); `instance()` uses the real one.
  Interposer(const DriverApi* driver, const Config& config);

 private:
  Interposer();
  class CopyEngine* engine();
  class PeerCopier* peer_copier();
  bool load_driver();  // with engine_mu held
  // What context_ends does once the handle is off the watch; also for an end the watch found.
  void let_go_of_context(CUcontext ctx, bool alive, const char* how);
  // Whether a copy cmt is about to take in `ctx` may go on (context_watch.h): yes if the handle
  // still names the context cmt knew by it, or names a new one after what cmt held in the old
  // one was let go here; no (forward it) if the driver cannot give its id, or another thread is
  // letting go. The current context's, for copies made in it.
  bool context_goes_on(CUcontext ctx) noexcept;
  bool current_context_goes_on() noexcept;
  // Arms the host leg with a copier on the current GPU's local cores, once.
  void arm_host_copies();
  // Where register = hot: the cache, attached to libcmt-release.so (no library, no cache).
  void build_register_cache();
  // The recorder's timer of copies on their streams (recorder.h), when the process records.
  void time_recorded_copies();
  static constexpr int kRecordedTimings = 256;
  // Whether the copy may be one for the cache: large enough to become a candidate, or touching
  // a registration (which CUDA would take as pinned, with no wait).
  bool maybe_hot(const void* dst, const void* src, std::size_t bytes, int kind) const;
  // The copy from a registration of cmt's, made or found by the cache: enqueued on the caller's
  // stream and waited for (a pageable copy's caller may write or free its buffer once the call
  // returns). Returns the bytes handled, 0: not from a registration (after dropping any
  // registration the range only touches, so that CUDA sees pageable memory again).
  // A copy of host range [host, host + bytes) that the cache counted and will not make from a
  // registration, on `stream`: with register = auto, what it lost is told to the cache when its
  // hook returns (copy_call_ended), and some such copies are timed on their streams.
  void time_loss(const void* host, std::size_t bytes, bool to_device, CUstream stream) const;
  // Tells the cache's estimates what the stream timer's finished timings took.
  static void collect_timings(class StreamTimer& timer) noexcept;
  std::size_t take_hot_copy(void* dst, const void* src, std::size_t bytes, int kind,
                            CUstream stream, Entry entry, std::optional<Direction>* taken);
  // The copy itself, from (or to) a registration held for it, whose pages are `*pages`, or with
  // `pages` null a small copy beside one, through pinned scratch (hot_copy.h): the bytes handled
  // (0: it failed, CUDA's now).
  std::size_t run_hot_copy(const CopyRequest& r,
                           const std::pair<std::uintptr_t, std::uintptr_t>* pages, Entry entry,
                           std::optional<Direction>* taken);

  Config config_;
  const DriverApi* driver_ = nullptr;
  bool driver_loaded_ = false;
  class CopyEngine* engine_ = nullptr;
  std::atomic<class PeerCopier*> peer_copier_{nullptr};  // read without the lock once built
  // GPUs the driver shows this process, asked at the first device-to-device copy (-1: not yet).
  std::atomic<int> gpu_count_{-1};
  Stats* stats_ = nullptr;
  WarmGate warm_gate_;  // copies between the warm thresholds and the thresholds
  ContextWatch contexts_;  // the context each handle named at cmt's last copy in it
  class RegisterCache* register_cache_ = nullptr;
  class PinnedScratch* edge_scratch_ = nullptr;    // made with the cache (hot_copy.h)
  class PinnedScratch* beside_scratch_ = nullptr;
};

// Held by a copy hook from before it offers a copy to after it forwards what cmt left, whoever
// made the copy: the whole call's time (Interposer::copy_call_began, copy_call_ended). Copies
// offered outside one (a batch's) are not timed.
class CopyCallScope {
 public:
  CopyCallScope() { Interposer::copy_call_began(); }
  ~CopyCallScope() { Interposer::copy_call_ended(); }
  CopyCallScope(const CopyCallScope&) = delete;
  CopyCallScope& operator=(const CopyCallScope&) = delete;
};

}  // namespace cmt
