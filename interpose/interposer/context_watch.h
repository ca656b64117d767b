// Catches the end of a CUDA context that no hook of cmt's saw, at the next copy cmt takes in it.
//
// cmt keeps streams, events, pinned rings and registrations per context, keyed by the context's
// handle, and lets go of them when a hook sees the context end (Interposer::context_ends). An end
// it does not see (a variant of the call cmt does not hook, a driver path it cannot reach, a
// release racing a retain) leaves those handles dead, and the driver may give the same handle to
// the next context: on the H100 the primary context's handle repeated after every reset, and a
// copy on a dead stream crashed the program. The driver's context id (cuCtxGetId, CUDA 12.0+)
// is unique for the life of the process, so a handle whose id changed names a new context, and
// everything cmt held under it belonged to the old one.
//
// The watch remembers, for each handle cmt has copied in, the id it had. A copy that finds a new
// id is told so once (whichever thread asks first); that thread lets go of the old context's
// resources and then settles the handle on its new id, while copies on other threads in it are
// forwarded to CUDA. An end that cmt's hooks saw forgets the handle, so it is not reported again.
// Known handles are answered without a lock; anything else takes a short one.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace cmt {

class ContextWatch {
 public:
  // Handles remembered at once: contexts alive in the process together (ended ones are
  // forgotten). Beyond it a context goes unwatched, as every context did before the watch.
  static constexpr int kSlots = 64;

  enum class Verdict {
    Known,      // the context cmt knew under this handle, or one it meets first: go on
    Ended,      // the handle names a new context: let go of the old one's, then settle()
    Unsure,     // another thread is letting go of the old one's right now: forward this copy
    Unwatched,  // no slot left: go on unwatched
  };

  // For a copy about to be taken in context `ctx`, whose id the driver gives as `id` (not 0).
  Verdict check(CUcontext ctx, std::uint64_t id);
  // After Ended, with the old context's resources let go: `ctx` is known by `id` from now on.
  void settle(CUcontext ctx, std::uint64_t id);
  // A hook saw `ctx` end: the next context under its handle is met as new.
  void forget(CUcontext ctx);

 private:
  static constexpr std::uint64_t kEnding = ~std::uint64_t{0};  // Ended was told; not settled
  struct Slot {
    std::atomic<CUcontext> handle{nullptr};
    std::atomic<std::uint64_t> id{0};
  };
  Slot* find(CUcontext ctx);  // with mu_ held

  Slot slots_[kSlots];
  std::mutex mu_;  // claims, changes and releases of slots; not the known-handle answer
};

}  // namespace cmt
