// The copy engine: moves one pageable-host <-> device copy through a ring of pinned staging
// buffers, with a pool of CPU threads filling (H2D) or draining (D2H) the buffers while the GPU's
// copy engine DMAs the others, every DMA ordered on the caller's stream. It knows nothing of
// symbol names and reaches CUDA only through a DriverApi table, so tests drive it with a fake.
// It never throws; whatever it could not do is reported as a prefix done, for the caller to
// forward the rest to CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/copy_types.h"
#include "cuda/driver_api.h"
#include "config/options.h"

namespace cmt {

// How one copy is cut: pieces (one staging slot and one DMA each) and units (the part of a piece
// that one worker copies). All workers fill a piece together, so the first DMA starts after a
// fraction of a piece's copy time, while DMAs stay large. With a ramp, the first pieces grow by
// doubling up to the steady size and the last ones shrink the same way: the first DMA starts
// (D2H: the first drain) after a small piece instead of a whole one, and the copy ends on a small
// DMA (D2H: a small drain) instead of a whole piece's.
struct CopyLayout {
  std::size_t bytes = 0;
  std::size_t piece = 0;   // the steady piece size, at most a staging slot
  std::size_t ramp = 0;    // pieces at each end below the steady size: piece >> ramp, ..., >> 1
  std::size_t pieces = 0;  // in all
  std::size_t units_per_piece = 0;

  // Where piece i starts; piece_offset(pieces) == bytes.
  std::size_t piece_offset(std::size_t i) const;
  std::size_t piece_length(std::size_t i) const { return piece_offset(i + 1) - piece_offset(i); }
  // The length of each unit of piece i (its last units may be short or empty).
  std::size_t unit_length(std::size_t i) const;
};

// Steady pieces: about 8 per copy, from 256 KiB up to a staging slot, and above `medium_piece`
// (0: no such limit) only once the copy holds 64 of them: each end of the pipeline waits about
// one piece, which a long copy can afford for the larger DMAs (on the H200 machine 4 MiB pieces
// gave 1 GiB D2H 0.97 of pinned against 0.94 with 2 MiB, and 64 MiB no better: NOTES.md 30).
// Ramp pieces: down to 256 KiB (when the copy is large enough for both ends). Units: a piece
// split across the threads, at least 64 KiB in a steady piece and 16 KiB in a ramp piece.
CopyLayout plan_copy(std::size_t bytes, unsigned threads, std::size_t slot_bytes, bool ramp = true,
                     std::size_t medium_piece = 0);

// How a host-to-device copy of `bytes` writes the staging buffers: as configured, or for `auto`,
// streaming below 256 MiB and memcpy above.
CopyMethod staging_method(CopyMethod configured, std::size_t bytes);

// Workers per lane when the configuration says 0: half the GPU's local cores, at most 8, leaving
// room for the application and the issuing thread.
unsigned auto_threads(std::size_t local_cpus);

// What a built lane runs with, for logs and tests.
struct LaneInfo {
  CUcontext ctx;
  Direction direction;
  unsigned threads;
  std::size_t slots, slot_bytes;
};

class CopyEngine {
 public:
  CopyEngine(const DriverApi& driver, const Config& config);
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // Must be called on the thread that issued the copy, with the stream's context current.
  CopyOutcome copy(const CopyRequest& request) noexcept;

  const Config& config() const { return config_; }
  // The lanes built so far (those not busy copying right now).
  std::vector<LaneInfo> lanes();

  struct Lane;

 private:
  // Locks a lane for (ctx, direction) into `hold`: a free one, else a new one while there are
  // fewer than config.lanes, else the first to come free within 200 ms; nullptr if none did.
  Lane* acquire_lane(CUcontext ctx, Direction direction, std::unique_lock<std::mutex>& hold);
  CUresult prepare(Lane& lane);  // builds the lane's ring and workers; called holding lane.busy
  CopyOutcome host_to_device(Lane& lane, const CopyRequest& request);
  CopyOutcome device_to_host(Lane& lane, const CopyRequest& request);

  const DriverApi& driver_;
  const Config config_;
  std::mutex lanes_mu_;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace cmt
