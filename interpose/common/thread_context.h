// Where the calling thread stands with respect to cmt: the one per-thread record every room reads
// to decide whether a call is the application's or cmt's own. Kept in one place, as mimalloc keeps
// its per-thread heap and UCX's ucm its per-thread hook state, so that a new hook asks one
// question instead of five.
//
// Plain data in initial-exec TLS, constant-initialized: reading it costs one load off %fs, never a
// call (__tls_get_addr could allocate, and these are read inside malloc and signal handlers).
#pragma once

namespace cmt {

struct ThreadContext {
  // Inside one of cmt's CUDA runtime hooks: cudart reaches the driver through the very cuMemcpy*
  // entry points cmt also hooks, so a driver hook further down the same call must not offer the
  // copy again.
  int runtime_hook_depth = 0;
  // Inside dlsym's decision (hooks/dlsym_hook.cpp): a lookup made from there goes straight to libc.
  bool deciding_dlsym = false;
  // The thread asked (cmt_forward_this_thread) for CUDA's own copies and libc's own memcpy:
  // how a benchmark times the default path in the same process as cmt's.
  bool opted_out = false;
  // Running cmt's own code on an application thread (a hook's decision, the engine's issuer): the
  // memcpy calls it makes are libc's.
  bool inside_cmt = false;
  // One of cmt's copy threads (engine/shared/worker_pool.h): everything it copies is libc's.
  bool copy_thread = false;

  // Whether a memcpy/memset made now is the application's own, for the host leg to take.
  bool application_call() const { return !inside_cmt && !copy_thread && !opted_out; }
};

// The calling thread's record. Named as a variable, not reached through a function returning a
// reference: GCC 12's UndefinedBehaviorSanitizer null-checks such a reference to initial-exec TLS
// with a branch on stale flags (it reported a null pointer whenever the instruction before had
// left zero), which the sanitizer builds of the tests hit.
inline thread_local ThreadContext t_thread __attribute__((tls_model("initial-exec")));

// Marks the calling thread as running cmt's own code for the scope's lifetime.
class InsideCmt {
 public:
  InsideCmt() : was_(t_thread.inside_cmt) { t_thread.inside_cmt = true; }
  ~InsideCmt() { t_thread.inside_cmt = was_; }
  InsideCmt(const InsideCmt&) = delete;
  InsideCmt& operator=(const InsideCmt&) = delete;

 private:
  bool was_;
};

// Marks the calling thread as inside a CUDA runtime hook for the scope's lifetime.
class RuntimeHookScope {
 public:
  RuntimeHookScope() { ++t_thread.runtime_hook_depth; }
  ~RuntimeHookScope() { --t_thread.runtime_hook_depth; }
  RuntimeHookScope(const RuntimeHookScope&) = delete;
  RuntimeHookScope& operator=(const RuntimeHookScope&) = delete;

  static bool active() { return t_thread.runtime_hook_depth > 0; }
};

}  // namespace cmt
