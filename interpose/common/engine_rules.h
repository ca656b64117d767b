// The numbers cmt's built-in rules are made of, written once: the engine and the tuner act on
// them, and the option table (config/options.cpp) quotes them in its help, which `cmt profile
// options` and the README print. A rule's reason is given where it is applied.
#pragma once

#include <chrono>
#include <cstddef>

namespace cmt::rules {

// Copy threads per copy when `threads` is 0: half the GPU's local cores, at most this many
// (engine/shared/gpu_locality.h).
inline constexpr unsigned kAutoThreadsMost = 8;
// A GPU's pool of copy threads leaves this many of its local cores to the issuing threads
// (engine/device/copy_plan.h's pool_threads).
inline constexpr unsigned kPoolSpareCores = 2;

// Copies are cut into about this many pieces (engine/device/copy_plan.h)...
inline constexpr std::size_t kPiecesPerCopy = 8;
// ...and pieces grow past chunk_bytes, up to a device-to-host slot, only in copies at least this
// many pieces long.
inline constexpr std::size_t kPiecesPerLongCopy = 64;

// How copy threads write with store method `auto` (engine/device/copy_plan.h): host-to-device
// staging streams below this size, device-to-host drains stream from that one on.
inline constexpr std::size_t kStreamingStageBelow = std::size_t{256} << 20;
inline constexpr std::size_t kStreamingDrainFrom = std::size_t{32} << 20;

// Lanes per GPU and direction when `lanes` is 0, on streams of the program's own and on the
// legacy default stream, and how long a copy waits for a free lane before CUDA gets it
// (engine/device/copy_engine.h).
inline constexpr unsigned kAutoLanes = 2;
inline constexpr unsigned kAutoLanesLegacy = 4;
inline constexpr std::chrono::milliseconds kLaneWait{200};

// All of the process's pinned staging stays under 1/kPinnedShare of the machine's memory
// (engine/shared/pinned_budget.h).
inline constexpr unsigned kPinnedShare = 8;
inline constexpr const char* kPinnedShareText = "an eighth";

// gpu_cores = split gives no GPU fewer cores than this: all of them are shared instead
// (engine/shared/gpu_locality.h).
inline constexpr std::size_t kMinCoreShare = 4;

// Fresh (never written) destinations from this size on are prepared, in blocks of this size, an
// x86-64 transparent huge page (engine/shared/fresh_pages.h).
inline constexpr std::size_t kFreshPagesFrom = std::size_t{8} << 20;
inline constexpr std::size_t kFreshBlock = std::size_t{2} << 20;

// Idle copy threads spin at most this long before they sleep (spin_us's bound).
inline constexpr unsigned kMaxSpinUs = 20000;

// `cmt tune` sets the host leg's thresholds where the copy threads beat one thread's libc call by
// this factor (tuner/pickers.h).
inline constexpr double kHostLegWin = 1.20;

// Reads of a regular file into CUDA host memory from this size on are read on the host leg's
// threads (interposer/host_leg.h): a loader's 1 MiB staging buffers and up.
inline constexpr std::size_t kFileReadFrom = std::size_t{512} << 10;
// memcpy and memmove calls from this size up to host_copy_threshold are taken too where they
// fill CUDA host memory from a source whose pages are not mapped in yet (the middle one asked of
// the page table): faulting them in on one thread costs several times the copy (safetensors'
// load_file copying 1 MiB tensors from a fresh file mapping into its pinned buffer: 0.13-0.3 ms
// each on one thread, 0.02 ms a MiB on eight; bench/lab/NOTES.md 73, 76), and the question is one
// pread (interposer/page_map.h), 1.5 us, a few percent of a 512 KiB copy it leaves to libc.
inline constexpr std::size_t kUnmappedCopyFrom = std::size_t{512} << 10;
// readv and preadv calls of at most this many segments are offered to the host leg, which copies
// the list onto its stack (interposer/host_leg.h's take_readv); longer lists are libc's.
inline constexpr int kMostReadSegments = 64;
// The most one read, pread or readv moves: the kernel's MAX_RW_COUNT (INT_MAX less a page), so a
// taken read comes back as short as the kernel's would.
inline constexpr std::size_t kMostReadBytes = 0x7ffff000;

}  // namespace cmt::rules
