#include "interposer/page_map.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace cmt {
namespace {

std::atomic<int> g_pagemap_fd{-2};  // -2: not opened yet; -1: cannot be opened

int pagemap_fd() noexcept {
  int fd = g_pagemap_fd.load(std::memory_order_acquire);
  if (fd != -2) return fd;
  const int opened = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (g_pagemap_fd.compare_exchange_strong(fd, opened, std::memory_order_acq_rel)) return opened;
  if (opened >= 0) close(opened);  // another thread's came first
  return fd;
}

long page_size() noexcept {
  static const long size = sysconf(_SC_PAGESIZE);
  return size;
}

}  // namespace

PageEntry page_entry(const void* p) noexcept {
  PageEntry e;
  const int fd = pagemap_fd();
  std::uint64_t entry = 0;
  const off_t at = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(p) / page_size() * 8);
  if (fd < 0 || pread(fd, &entry, sizeof entry, at) != sizeof entry) return e;
  e.known = true;
  e.present = (entry >> 63) & 1;
  e.file = (entry >> 61) & 1;
  return e;
}

void page_map_forget_in_child() noexcept {
  const int fd = g_pagemap_fd.exchange(-2, std::memory_order_acq_rel);
  if (fd >= 0) close(fd);
}

}  // namespace cmt
