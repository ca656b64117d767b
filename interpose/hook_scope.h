// Per-thread state of cmt's hooks. RuntimeHookScope marks the calling thread as inside one of
// cmt's runtime hooks. cudart reaches the driver
// through the very cuMemcpy* entry points that cmt also hooks, so a copy the runtime hook has
// already offered to the engine (and is now forwarding) must not be offered again by a driver
// hook further down the same call.
#pragma once

namespace cmt {

class RuntimeHookScope {
 public:
  RuntimeHookScope() { ++depth_; }
  ~RuntimeHookScope() { --depth_; }
  RuntimeHookScope(const RuntimeHookScope&) = delete;
  RuntimeHookScope& operator=(const RuntimeHookScope&) = delete;

  static bool active() { return depth_ > 0; }

 private:
  // initial-exec: no __tls_get_addr (and so no malloc) on the copy path of a preloaded library.
  static inline thread_local int depth_ __attribute__((tls_model("initial-exec"))) = 0;
};

// A thread that asked (cmt_forward_this_thread) to have every copy forwarded to CUDA untouched:
// how a benchmark times CUDA's own path in the same process as cmt's.
class ThreadOptOut {
 public:
  static bool active() { return forward_; }
  static bool set(bool forward) {
    bool was = forward_;
    forward_ = forward;
    return was;
  }

 private:
  static inline thread_local bool forward_ __attribute__((tls_model("initial-exec"))) = false;
};

}  // namespace cmt
