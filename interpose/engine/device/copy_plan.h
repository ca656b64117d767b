// How one copy is cut, and the choices made from its size alone. Pure arithmetic: no CUDA, no
// threads, so every rule here is unit-tested directly (tests/copy_plan_test.cpp).
//
// The words, used the same way throughout the engine:
//   piece - a stretch of the copy that passes through one staging slot in one DMA;
//   slot  - one pinned staging buffer of the ring (the largest a piece can be);
//   unit  - the part of a piece that one worker copies (the worker pool's unit of work);
//   chunk - in option names only (chunk_bytes, d2h_chunk_bytes): the largest piece.
#pragma once

#include <cstddef>

#include "common/copy_types.h"
#include "common/engine_rules.h"

namespace cmt {

// All workers fill a piece together, so the first DMA starts after a fraction of a piece's copy
// time, while DMAs stay large. With a ramp, the first pieces grow by doubling up to the steady
// size and the last ones shrink the same way: the first DMA starts (D2H: the first drain) after a
// small piece instead of a whole one, and the copy ends on a small DMA (D2H: a small drain)
// instead of a whole piece's.
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
// gave 1 GiB D2H 0.97 of pinned against 0.94 with 2 MiB, and 64 MiB no better: bench/lab/NOTES.md
// 30). Ramp pieces: down to 256 KiB (when the copy is large enough for both ends). Units: a piece
// split across the threads, at least 64 KiB in a steady piece and 16 KiB in a ramp piece.
CopyLayout plan_copy(std::size_t bytes, unsigned threads, std::size_t slot_bytes, bool ramp = true,
                     std::size_t medium_piece = 0);

// How a host-to-device copy of `bytes` writes the staging buffers: as configured, or for `auto`,
// streaming below 256 MiB and memcpy above.
CopyMethod staging_method(CopyMethod configured, std::size_t bytes);

// How a device-to-host copy of `bytes` writes the user's buffer: as configured, or for `auto`,
// memcpy below 32 MiB (the destination stays in the cache, where the program reads it next) and
// streaming from there (a large one is not read back soon, and need not evict the cache).
CopyMethod drain_method(CopyMethod configured, std::size_t bytes);

// The threads of a GPU's shared pool, which all its lanes' copies draw on, each at most
// `per_copy` at a time: room for two copies at once (both directions, or two callers), but no
// more than the local cores less two (the issuing threads), and never fewer than one copy's.
unsigned pool_threads(unsigned per_copy, std::size_t local_cpus);

}  // namespace cmt
