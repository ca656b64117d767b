#include "cuda/real_dl.h"

#include <dlfcn.h>

#include <atomic>
#include <initializer_list>

namespace cmt {
namespace {

using DlsymFn = void* (*)(void*, const char*);

std::atomic<NextSymbolFinder> g_next_symbol_finder{nullptr};

DlsymFn find_libc_dlsym() {
  // glibc 2.34 moved dlsym into libc.so.6 under a new version; older ones have it in libdl under
  // the architecture's base version.
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.17", "GLIBC_2.2.5", "GLIBC_2.0"})
    for (void* scope : {RTLD_NEXT, RTLD_DEFAULT})
      if (void* fn = dlvsym(scope, "dlsym", version)) return reinterpret_cast<DlsymFn>(fn);
  return nullptr;
}

}  // namespace

void* libc_dlsym_address() {
  static const DlsymFn fn = find_libc_dlsym();
  return reinterpret_cast<void*>(fn);
}

void* real_dlsym(void* handle, const char* name) {
  auto fn = reinterpret_cast<DlsymFn>(libc_dlsym_address());
  return fn ? fn(handle, name) : nullptr;
}

void set_next_symbol_finder(NextSymbolFinder finder) {
  g_next_symbol_finder.store(finder, std::memory_order_release);
}

void* next_symbol(const char* name) {
  if (NextSymbolFinder finder = g_next_symbol_finder.load(std::memory_order_acquire))
    return finder(name);
  return real_dlsym(RTLD_NEXT, name);
}

}  // namespace cmt
