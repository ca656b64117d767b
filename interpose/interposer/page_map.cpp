#include "interposer/page_map.h"

#include <unistd.h>

#include <cstdint>

#include "common/kept_file.h"

namespace cmt {
namespace {

KeptFile g_pagemap("/proc/self/pagemap");  // constant-initialized; nothing runs at exit

long page_size() noexcept {
  static const long size = sysconf(_SC_PAGESIZE);
  return size;
}

}  // namespace

PageEntry page_entry(const void* p) noexcept {
  PageEntry e;
  std::uint64_t entry = 0;
  const off_t at = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(p) / page_size() * 8);
  if (g_pagemap.pread_at(&entry, sizeof entry, at) != sizeof entry) return e;
  e.known = true;
  e.present = (entry >> 63) & 1;
  e.file = (entry >> 61) & 1;
  return e;
}

void page_map_forget_in_child() noexcept {
  g_pagemap.reopen();
}

}  // namespace cmt
