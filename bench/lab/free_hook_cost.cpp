// Issue 33's first question, before any registration cache exists: what does a free() hook cost a
// program while nothing is registered? Built twice from this file: as a preload (-DHOOK) whose
// free() does what the cache's hook would on its fast path (one relaxed load of the registered
// count, then libc's free), and as the loop it is timed on (malloc(64) and free, the commonest
// pair). Prints ns per pair. bench/lab/free_hook_cost.sh builds both and alternates them.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#ifdef HOOK
namespace {
using FreeFn = void (*)(void*);
FreeFn g_real_free = nullptr;
std::atomic<std::size_t> g_registered{0};  // ranges registered: none, in this experiment
__attribute__((constructor)) void find_free() {
  g_real_free = reinterpret_cast<FreeFn>(dlsym(RTLD_NEXT, "free"));
}
// Where the cache would look: is the chunk mmap'd (glibc's IS_MMAPPED bit in its size word)?
__attribute__((noinline)) void checked_free(void* p) {
  if (p && (static_cast<std::size_t*>(p)[-1] & 2)) g_registered.load(std::memory_order_acquire);
  g_real_free(p);
}
}  // namespace

extern "C" void free(void* p) {
  if (__builtin_expect(g_registered.load(std::memory_order_relaxed) == 0 && g_real_free, 1))
    return g_real_free(p);
  checked_free(p);
}
#else
int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000000;
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
#endif
