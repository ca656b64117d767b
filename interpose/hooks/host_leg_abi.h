// The one interface between libcmt-host.so (the C library's copies and fills, hooks/libc_hooks.cpp)
// and libcmt-engine.so (the host leg, interposer/host_leg.h): a table of what the hooks need, which
// the engine hands to libcmt-host.so's kHostLibraryAttachSymbol when libcmt.so loads the engine
// (on the first CUDA call: hooks/engine_link.h). Both sides include this header, so the types are
// written once. Until then, or with a table of another version, libcmt-host.so hands every call to
// libc.
#pragma once

#include <signal.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>

#include "common/caller_hold.h"

namespace cmt {

inline constexpr unsigned kHostLegAbiVersion = 5;
using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
inline constexpr const char* kHostLibraryAttachSymbol = "cmt_host_library_attach";

// A file read the host leg took (`taken`), and what the call returns: `result`, with `error` the
// errno where that is -1.
struct HostRead {
  bool taken;
  long result;
  int error;
};

struct HostLegAbi {
  unsigned version;  // kHostLegAbiVersion
  // memcpy/memmove (copy) and memset (fill) calls below these go to libc after one compare; both
  // are SIZE_MAX while the host leg is not armed (before a copier exists, in a forked child). The
  // copy one is the host leg's gate (HostLeg::copy_gate), which may lie below host_copy_threshold:
  // the leg decides past it.
  const std::atomic<std::size_t>* copy_threshold;
  const std::atomic<std::size_t>* fill_threshold;
  // Copies (fills) on cmt's threads and returns how many leading bytes are done; libc must make
  // the rest, on the calling thread (all of it after 0: not taken; some after a fault stopped
  // cmt's threads, which libc's memcpy then meets where the program expects it). memcpy and
  // memmove alike: overlapping ranges are always left to libc. A taken call leaves the thread
  // held (common/caller_hold.h): the hook releases it once back.
  std::size_t (*copy)(void* dst, const void* src, std::size_t bytes, CallerHold* hold) noexcept;
  std::size_t (*fill)(void* dst, int value, std::size_t bytes, CallerHold* hold) noexcept;
  // read (`offset` negative: at the descriptor's offset) and pread calls of at least
  // *read_threshold bytes (SIZE_MAX: none): a regular file's bytes into CUDA host memory, read on
  // cmt's threads; not taken, libc's read or pread makes the call. Held as copy() holds.
  const std::atomic<std::size_t>* read_threshold;
  HostRead (*read)(int fd, void* dst, std::size_t bytes, long long offset,
                   CallerHold* hold) noexcept;
  // readv and preadv (`offset` negative: readv's) of a regular file with a segment of at least
  // *read_threshold bytes in CUDA host memory, as read() above; the hooks offer every call of at
  // most rules::kMostReadSegments segments while *read_threshold is not SIZE_MAX.
  HostRead (*readv)(int fd, const struct iovec* segments, int count, long long offset,
                    CallerHold* hold) noexcept;
  // libcmt-host.so says it is loaded, and which sigaction lies below its own: only then does
  // the engine start threads for the host leg and put its fault handler in front. Called from
  // libcmt-host.so's attach, inside cmt_engine_attach.
  void (*hooks_loaded)(SigactionFn next_sigaction) noexcept;
  // sigaction as the program sees it (interposer/signal_chain.h).
  int (*sigaction)(int sig, const struct sigaction* act, struct sigaction* old) noexcept;
};

}  // namespace cmt

namespace cmt {
// libcmt-engine.so's table (hooks/host_leg_exports.cpp), valid for the life of the process.
const HostLegAbi* cmt_host_leg_abi() noexcept;
}  // namespace cmt

// Exported by libcmt-host.so (hooks/libc_hooks.cpp): takes the engine's table, once.
extern "C" void cmt_host_library_attach(const cmt::HostLegAbi* abi) noexcept;
