// GPU-to-GPU copies through the host, for two GPUs without peer access (none possible, as between
// consumer cards, or none enabled): the seeds' double-buffered design (gpu-to-gpu-copy-over-pcie
// .txt). CUDA stages such a copy itself, one D2H and then one H2D at a time; here the source GPU's
// D2H of one piece into a pinned slot overlaps the destination GPU's H2D of the piece before, and
// pieces grow from 512 KiB to a slot's size and shrink again at the end, so neither a short copy
// nor the last piece of a long one waits for a full slot. Everything is ordered on the GPUs with
// events (no CPU thread touches the bytes), so an asynchronous copy returns once it is enqueued.
//
// Each ordered pair of contexts has a lane: its own pinned slots, a stream in each context and an
// event per slot each way. A lane is held by one caller while it enqueues (a synchronous caller
// also while it waits); callers of the same pair queue behind one another, as on the link.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda/driver_api.h"
#include "engine/shared/staging_ring.h"

namespace cmt {

// One device-to-device copy between two contexts, taken (classify_peer_copy decides).
struct PeerRequest {
  CUdeviceptr dst = 0, src = 0;
  CUcontext dst_ctx = nullptr, src_ctx = nullptr;
  std::size_t bytes = 0;
  // Explicit: a user stream, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD, whose context is
  // stream_ctx (the caller's for the last two). An asynchronous copy is ordered in it: after the
  // work queued there before, before the work queued after. stream_ctx must be src_ctx or dst_ctx.
  CUstream stream = CU_STREAM_LEGACY;
  CUcontext stream_ctx = nullptr;
  // cuMemcpyPeer, cudaMemcpy: ordered after the work in `stream` (a default-stream handle) of
  // both contexts and the caller's, and finished when copy() returns.
  bool synchronous = false;
};

struct PeerOutcome {
  // Bytes [0, bytes_done) are enqueued (and, for a synchronous copy, copied); the caller forwards
  // the rest to CUDA on the same stream. `status`: why the copier stopped short.
  std::size_t bytes_done = 0;
  CUresult status = CUDA_SUCCESS;
};

// How a lane cuts copies: its pinned slots and the first piece.
struct PeerShape {
  unsigned slots;
  std::size_t slot_bytes, first_piece;
};

class PeerCopier {
 public:
  // Per lane: 4 slots of 16 MiB (64 MiB pinned per pair of GPUs that copies this way). Four keep
  // three D2H pieces ahead of the H2D; 16 MiB pieces run both links at full speed. The first
  // piece is 512 KiB: a 1 MiB copy goes in two halves, which on the H200 (two contexts, lab/NOTES
  // 36) took 51 us against 57 in the four pieces a 256 KiB start cuts, the bare two-leg chain's
  // best being 50; past 16 MiB the start no longer shows.
  static constexpr unsigned kSlots = 4;
  static constexpr std::size_t kSlotBytes = std::size_t{16} << 20;
  static constexpr std::size_t kFirstPiece = std::size_t{512} << 10;
  static constexpr unsigned kMaxSlots = 16;
  // Every lane's slots draw on `budget` (the process's, by default, shared with the copy engine's
  // rings): a pair of GPUs whose lane would pass it is left to CUDA. 64 MiB a lane, so an eighth
  // of a 64 GiB host holds 128 lanes, every ordered pair of 8 GPUs twice over.
  explicit PeerCopier(const DriverApi& driver,
                      PeerShape shape = {kSlots, kSlotBytes, kFirstPiece},
                      PinnedBudget& budget = PinnedBudget::process());
  ~PeerCopier();
  PeerCopier(const PeerCopier&) = delete;
  PeerCopier& operator=(const PeerCopier&) = delete;

  // The caller's current context is the same on return. Never throws.
  PeerOutcome copy(const PeerRequest& request) noexcept;
  // `ctx` ends (`alive`: it is about to; else the driver has destroyed it): the lanes that name
  // it are let go, and a copy between the contexts that follow builds a lane anew. A lane no copy
  // holds is freed once the other context's stream is drained: its handles freed in the
  // contexts that live, those of an ended one forgotten (never passed to CUDA again), its slots
  // unmapped and their pinned bytes given back. One a copy on another thread holds (a program
  // ending a context it copies in) is leaked, as is one whose streams cannot say they are idle.
  // Returns how many lanes named it.
  unsigned forget_context(CUcontext ctx, bool alive);

  // The size of piece `index` of a copy with `remaining` bytes left: doubling from the first piece
  // to a slot's size, and from where fewer than two such pieces are left, half of what is left
  // (in 64 KiB steps), down to the first piece; never more than `remaining`.
  static std::size_t piece_bytes(std::size_t index, std::size_t remaining,
                                 const PeerShape& shape = {kSlots, kSlotBytes, kFirstPiece});

  struct Lane;

 private:
  // The lane of (src_ctx, dst_ctx), built on first use, or rebuilt if an error broke it; nullptr
  // (and *error set) if it could not be built, CUDA_ERROR_OUT_OF_MEMORY where its slots would
  // pass the pinned limit.
  // The lane comes counted as in use (Lane::users): the caller lets go of it with release().
  Lane* lane_for(CUcontext src_ctx, CUcontext dst_ctx, CUresult* error);
  void release(Lane& lane);
  // Frees a lane no copy holds; `ended` (or nullptr) names a context the driver has destroyed.
  void free_lane(std::unique_ptr<Lane> lane, CUcontext ended);
  PeerOutcome run(Lane& lane, const PeerRequest& request);

  const DriverApi& driver_;
  const PeerShape shape_;
  PinnedBudget& budget_;
  std::mutex lanes_mu_;
  std::map<std::pair<CUcontext, CUcontext>, std::unique_ptr<Lane>> lanes_;
  // Broken lanes, replaced: a DMA may still touch their slots, so they are kept as long as the
  // copier (the process's, for good).
  std::vector<std::unique_ptr<Lane>> retired_;
};

}  // namespace cmt
