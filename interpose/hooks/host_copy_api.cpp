// What libcmt-host.so (hooks/libc_hooks.cpp) asks of libcmt.so, as C functions it finds with
// dlsym: the host copier's thresholds, read on every large-enough memcpy or memset, and the copy
// or fill itself.
#include <atomic>
#include <cstddef>

#include "engine/host_copier.h"
#include "interposer/interposer.h"

// The threshold below which memcpy/memmove go to libc (SIZE_MAX while no copier is armed).
extern "C" __attribute__((visibility("default"))) const std::atomic<std::size_t>*
cmt_host_copy_threshold() noexcept {
  return &cmt::g_host_copy_threshold;
}

// Copies on the host copier's threads and returns 1, or returns 0 having touched nothing (libc
// must copy): the copier declines (engine/host_copier.h), or the thread opted out of cmt.
extern "C" __attribute__((visibility("default"))) int cmt_host_copy(void* dst, const void* src,
                                                                    std::size_t n,
                                                                    int is_memmove) noexcept {
  cmt::HostCopier* copier = cmt::HostCopier::armed();
  return copier && copier->take(dst, src, n, is_memmove != 0);
}

// The same for memset (engine/host_copier.h's take_fill).
extern "C" __attribute__((visibility("default"))) const std::atomic<std::size_t>*
cmt_host_fill_threshold() noexcept {
  return &cmt::g_host_fill_threshold;
}

extern "C" __attribute__((visibility("default"))) int cmt_host_fill(void* dst, int value,
                                                                    std::size_t n) noexcept {
  cmt::HostCopier* copier = cmt::HostCopier::armed();
  return copier && copier->take_fill(dst, value, n);
}
