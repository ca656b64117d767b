// RuntimeHookScope marks the calling thread as inside one of cmt's runtime hooks. cudart reaches
// the driver through the very cuMemcpy* entry points that cmt also hooks, so a copy the runtime
// hook has already offered to the engine (and is now forwarding) must not be offered again by a
// driver hook further down the same call.
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

}  // namespace cmt
