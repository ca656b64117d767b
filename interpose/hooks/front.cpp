// libcmt.so: the library `cmt run` preloads into every process, kept small because every process
// pays for loading it, most of them never copying with CUDA (a shell, make, a version-manager
// shim). It exports the hooked CUDA entry points (hook_table.h) and dlsym (dlsym_hook.cpp), and
// nothing behind them: on the first call of one, it loads libcmt-engine.so from its own folder
// (hooks/engine_link.h), which holds the rest of cmt, and from then on each export is one indirect
// jump to the engine's hook of the same name.
//
// Written against libc alone: no C++ runtime (no exceptions, no guarded statics, no allocation),
// so that loading it costs what a small C library costs (bench/lab/NOTES.md 43).
//
// If the engine cannot be loaded (a partial install), libcmt.so says so once on stderr and every
// export forwards to the definition a program would reach without cmt: the call goes to CUDA
// untouched.
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

#include "cuda/real_dl.h"
#include "hooks/engine_link.h"
#include "hooks/exported.h"
#include "hooks/front.h"
#include "hooks/hook_shapes.h"
#include "hooks/hook_table.h"

namespace cmt::front {
namespace {

enum Row : int {
  CMT_RUNTIME_HOOKS(CMT_HOOK_ENUM) CMT_DRIVER_HOOKS(CMT_HOOK_ENUM) ForwardThisThread,
  kRows
};
const char* const kRowNames[kRows] = {
    CMT_RUNTIME_HOOKS(CMT_HOOK_NAME) CMT_DRIVER_HOOKS(CMT_HOOK_NAME) "cmt_forward_this_thread"};

// Where each export jumps: the engine's function of the same name once loaded, or the next
// definition if the engine could not be. Zero-initialized: resolved on first use.
std::atomic<void*> g_targets[kRows];

enum State : int { NotTried, Loading, Loaded, Failed };
std::atomic<int> g_state{NotTried};
std::atomic<pthread_t> g_loader{};     // the thread inside the load, which must not wait for itself
const EngineLink* g_engine = nullptr;  // published by g_state = Loaded

char g_engine_path[PATH_MAX];  // found at load time, while a relative path still means the same
const void* g_front_base = nullptr;

// RTLD_NEXT resolves against the return address of the C library's dlsym, which must lie in
// libcmt.so: a call from here, never a tail call (which would hand dlsym our caller's address, in
// the engine, whose local scope holds no CUDA).
__attribute__((noinline)) void* next_after_front(const char* name) noexcept {
  DlsymFn libc = libc_dlsym();
  void* found = libc ? libc(RTLD_NEXT, name) : nullptr;
  asm volatile("" : "+r"(found));  // used after the call: the call cannot become a jump
  return found;
}

// Where a program's CUDA call goes when there is no engine: the next definition, or, where the
// library that defines it was opened privately (RTLD_LOCAL, as cudart and Python extensions open
// theirs, out of RTLD_NEXT's reach), the definition in that library, as the engine finds it
// (cuda/real_runtime.h, hooks/driver_hooks.cpp).
int find_cudart(struct dl_phdr_info* info, size_t, void* out) {
  if (!info->dlpi_name || !strstr(info->dlpi_name, "libcudart.so")) return 0;
  *static_cast<const char**>(out) = info->dlpi_name;
  return 1;
}

void* definition_without_engine(const char* name) {
  if (void* next = next_after_front(name)) return next;
  const char* library = "libcuda.so.1";
  if (strncmp(name, "cuda", 4) == 0) {
    library = nullptr;
    dl_iterate_phdr(find_cudart, &library);
    if (!library) return nullptr;
  }
  void* handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return nullptr;
  DlsymFn libc = libc_dlsym();
  void* fn = libc ? libc(handle, name) : nullptr;
  dlclose(handle);  // drops the reference RTLD_NOLOAD added; the library stays loaded
  return fn;
}

bool address_in_front(const void* address) noexcept {
  Dl_info info{};
  return g_front_base && dladdr(address, &info) && info.dli_fbase == g_front_base;
}

const FrontLink kFrontLink{kEngineLinkVersion, next_after_front, address_in_front};

// Said once, whatever the log level: cmt is not doing what the user asked it to do.
void say_not_loaded(const char* why) {
  char line[PATH_MAX + 512];
  int n =
      snprintf(line, sizeof line, "cmt: cannot load %s (%s); CUDA's copies go to CUDA untouched\n",
               g_engine_path[0] ? g_engine_path : kEngineFileName, why);
  if (n > 0)
    (void)!write(STDERR_FILENO, line, static_cast<size_t>(n) < sizeof line ? n : sizeof line - 1);
}

const EngineLink* open_engine() {
  if (!g_engine_path[0]) {
    say_not_loaded("libcmt.so could not tell its own folder");
    return nullptr;
  }
  void* handle = dlopen(g_engine_path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    say_not_loaded(why ? why : "dlopen failed");
    return nullptr;
  }
  using AttachFn = const EngineLink* (*)(const FrontLink*) noexcept;
  DlsymFn libc = libc_dlsym();
  auto attach = libc ? reinterpret_cast<AttachFn>(libc(handle, kEngineAttachSymbol)) : nullptr;
  const EngineLink* link = attach ? attach(&kFrontLink) : nullptr;
  if (!link) {
    say_not_loaded("it is of another version than libcmt.so");
    return nullptr;  // left loaded (it is -z nodelete), unused
  }
  for (int row = 0; row < kRows; ++row)
    g_targets[row].store(libc(handle, kRowNames[row]), std::memory_order_relaxed);
  return link;
}

// The thread that wins loads; the others wait for it. A hooked call made from inside the load
// (an engine constructor) is answered "no engine" rather than waiting for itself. No cancellation
// acts during the load: saying that it failed writes to stderr, a cancellation point inside
// noexcept frames (hooks/hook_hold.h says why that would end the process); one pending acts at
// the thread's next cancellation point.
const EngineLink* load_engine() {
  int state = NotTried;
  if (g_state.compare_exchange_strong(state, Loading, std::memory_order_acq_rel)) {
    g_loader.store(pthread_self(), std::memory_order_relaxed);
    int cancel_state = PTHREAD_CANCEL_ENABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    g_engine = open_engine();
    pthread_setcancelstate(cancel_state, nullptr);
    g_state.store(g_engine ? Loaded : Failed, std::memory_order_release);
    return g_engine;
  }
  if (state == Loading && pthread_equal(g_loader.load(std::memory_order_relaxed), pthread_self()))
    return nullptr;
  while ((state = g_state.load(std::memory_order_acquire)) == Loading) sched_yield();
  return state == Loaded ? g_engine : nullptr;
}

// A child forked while another thread was loading the engine would wait for a load that no
// thread of it makes: it forwards instead, as cmt's forked children do anyway (interposer.h).
void after_fork_in_child() {
  int loading = Loading;
  g_state.compare_exchange_strong(loading, Failed, std::memory_order_acq_rel);
}

// The folder libcmt.so was loaded from, made absolute now: the program may chdir before its
// first CUDA call.
__attribute__((constructor)) void find_engine_and_dlsym() {
  (void)libc_dlsym();  // found now, before the program's threads can race to find it
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&find_engine_and_dlsym), &info) || !info.dli_fname) return;
  g_front_base = info.dli_fbase;
  const char* file = info.dli_fname;
  const char* slash = strrchr(file, '/');
  char dir[PATH_MAX] = ".";
  if (slash) snprintf(dir, sizeof dir, "%.*s", static_cast<int>(slash - file), file);
  if (dir[0] != '/') {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return;
    char joined[PATH_MAX];
    if (snprintf(joined, sizeof joined, "%s/%s", cwd, dir) >= static_cast<int>(sizeof joined))
      return;
    memcpy(dir, joined, sizeof dir);
  }
  if (snprintf(g_engine_path, sizeof g_engine_path, "%s/%s", dir, kEngineFileName) >=
      static_cast<int>(sizeof g_engine_path))
    g_engine_path[0] = '\0';
}

}  // namespace

DlsymFn libc_dlsym() noexcept {
  return reinterpret_cast<DlsymFn>(libc_dlsym_address());  // cuda/real_dl.h, shared with the engine
}

const EngineLink* engine() noexcept {
  const int state = g_state.load(std::memory_order_acquire);
  if (state == Loaded) return g_engine;
  if (state == Failed) return nullptr;
  return load_engine();
}

bool is_hooked_name(const char* name) noexcept {
  if (!name || name[0] != 'c' || name[1] != 'u') return false;
  for (int row = 0; row < ForwardThisThread; ++row)
    if (strcmp(name, kRowNames[row]) == 0) return true;
  return false;
}

bool in_front(const void* address) noexcept {
  return address_in_front(address);
}

void* next_symbol(const char* name) noexcept {
  return next_after_front(name);
}

void* target(int row) noexcept {
  if (void* fn = g_targets[row].load(std::memory_order_acquire)) return fn;
  const bool loaded = engine() != nullptr;
  if (loaded) {
    if (void* fn = g_targets[row].load(std::memory_order_acquire)) return fn;
  }
  // No engine (or none yet, on the thread loading it): what the program would reach without cmt.
  void* next = definition_without_engine(kRowNames[row]);
  if (g_state.load(std::memory_order_acquire) == Failed && next)
    g_targets[row].store(next, std::memory_order_release);
  return next;
}

}  // namespace cmt::front

namespace {

// The value a hooked entry point returns when there is nothing to forward to, as the engine's
// hooks do: cudaErrorInitializationError and CUDA_ERROR_NOT_INITIALIZED.
template <typename Result>
Result not_initialized();
template <>
cudaError_t not_initialized<cudaError_t>() {
  return cudaErrorInitializationError;
}
template <>
CUresult not_initialized<CUresult>() {
  return CUDA_ERROR_NOT_INITIALIZED;
}

}  // namespace

// Each export: one indirect jump (a tail call) to the engine's hook of the same name.
#define CMT_FRONT_WRAPPER(name, result, params, args)                                              \
  extern "C" __attribute__((visibility("default"))) result name params {                           \
    using Fn = result(*) params;                                                                   \
    if (auto fn = reinterpret_cast<Fn>(cmt::front::target(cmt::front::Row::name))) return fn args; \
    return not_initialized<result>();                                                              \
  }
#define CMT_FRONT_EXPORT(name, ...) CMT_FRONT_WRAPPER(name, __VA_ARGS__)
#define CMT_FRONT_HOOK(name, shape, per_thread) CMT_FRONT_EXPORT(name, CMT_SHAPE_##shape)
CMT_RUNTIME_HOOKS(CMT_FRONT_HOOK)
CMT_DRIVER_HOOKS(CMT_FRONT_HOOK)

// hooks/runtime_hooks.cpp says what it does. Without an engine there is nothing to opt out of.
extern "C" __attribute__((visibility("default"))) int cmt_forward_this_thread(int forward) {
  using Fn = int (*)(int);
  void* fn = cmt::front::target(cmt::front::ForwardThisThread);
  return fn ? reinterpret_cast<Fn>(fn)(forward) : 0;
}
