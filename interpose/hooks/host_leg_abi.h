// The one interface between libcmt-host.so (the C library's copies and fills, hooks/libc_hooks.cpp)
// and libcmt.so (the host leg, interposer/host_leg.h): a table of what the hooks need, which
// libcmt-host.so fetches with a single dlsym of kHostLegAbiSymbol when it loads. Both sides include
// this header, so the types are written once. Without libcmt.so (or with a table of another
// version) libcmt-host.so hands every call to libc.
#pragma once

#include <atomic>
#include <cstddef>

namespace cmt {

inline constexpr unsigned kHostLegAbiVersion = 1;
inline constexpr const char* kHostLegAbiSymbol = "cmt_host_leg_abi";

struct HostLegAbi {
  unsigned version;  // kHostLegAbiVersion
  // memcpy/memmove (copy) and memset (fill) calls below these go to libc after one compare; both
  // are SIZE_MAX while the host leg is not armed (before a copier exists, in a forked child).
  const std::atomic<std::size_t>* copy_threshold;
  const std::atomic<std::size_t>* fill_threshold;
  // Copies (fills) on cmt's threads and returns 1, or returns 0 having touched nothing: libc must
  // do it. memcpy and memmove alike: overlapping ranges are always left to libc.
  int (*copy)(void* dst, const void* src, std::size_t bytes) noexcept;
  int (*fill)(void* dst, int value, std::size_t bytes) noexcept;
  // libcmt-host.so says it is loaded: only then does libcmt.so start threads for the host leg.
  // Called from libcmt-host.so's constructor, which may run before libcmt.so's: it only sets a
  // flag that is constant-initialized.
  void (*hooks_loaded)() noexcept;
};

}  // namespace cmt

// Exported by libcmt.so (hooks/host_leg_exports.cpp): the table, valid for the life of the process.
extern "C" const cmt::HostLegAbi* cmt_host_leg_abi() noexcept;
