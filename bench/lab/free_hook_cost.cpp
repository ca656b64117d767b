// Issue 33: what libcmt-release.so's free() hook costs a program: ns per malloc(64) + free pair,
// the commonest pair, with nothing registered (the watch empty) and with registrations elsewhere
// (a watched span the freed chunks are not in). bench/lab/free_hook_cost.sh runs this loop without
// the library and with it, alternating, on one core.
//
// usage: free_hook_cost PAIRS [empty|elsewhere]
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/release_abi.h"

namespace {
void ignore_pages(std::uintptr_t, std::uintptr_t) noexcept {}
void ignore_all() noexcept {}
bool free_now(void*, std::uintptr_t, std::uintptr_t) noexcept { return false; }
bool not_registered(std::uintptr_t, std::uintptr_t) noexcept { return false; }
const cmt::ReleaseAbi kAbi{cmt::kReleaseAbiVersion, ignore_pages, ignore_pages, free_now,
                           not_registered, ignore_all};
}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000000;
  if (argc > 2) {
    using AttachFn = const cmt::ReleaseLibrary* (*)(const cmt::ReleaseAbi*) noexcept;
    auto attach =
        reinterpret_cast<AttachFn>(dlsym(RTLD_DEFAULT, cmt::kReleaseLibraryAttachSymbol));
    const cmt::ReleaseLibrary* lib = attach ? attach(&kAbi) : nullptr;
    if (!lib) {
      std::fprintf(stderr, "libcmt-release.so is not preloaded\n");
      return 2;
    }
    // Registrations far above the heap, where glibc's mmap'd chunks would be.
    if (std::strcmp(argv[2], "elsewhere") == 0) lib->watch(0x7f0000000000, 0x7f0010000000, 64 << 10);
  }
  void* volatile keep = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    void* p = std::malloc(64);
    keep = p;
    std::free(p);
  }
  (void)keep;
  std::printf("%.2f\n", std::chrono::duration<double, std::nano>(
                            std::chrono::steady_clock::now() - t0).count() / n);
  return 0;
}
