// The calling thread held (common/caller_hold.h) for the whole of a hooked CUDA call: from the
// moment a hook is entered until it returns to the program, no cancellation acts on the thread.
// cmt's code on the program's thread (the engine's waits for a lane or a stream, reading its
// configuration, writing a log line or a trace, loading the engine) meets cancellation points
// inside noexcept frames that a cancellation's unwinding cannot pass: a thread with a
// cancellation pending that called cuMemcpyHtoD ended the whole process ("terminate called
// without an active exception"). Held, a pending cancellation acts when the hook returns (or at
// the program's next cancellation point), as if the CUDA call were not one, and the copy the
// program asked for is whole. While cmt's threads work on the caller's buffers, signals the
// program handles are put aside too (held_offer.h), and sent again here, on the way out.
//
// Each hook holds the thread itself, and leaves the hold by leave() as the last thing before
// returning to the program: a cancellation or a handler acts from there, where no frame of cmt's
// holds anything. A driver hook reached from a runtime hook (cudart's own call) is inside that
// hook's hold and takes none. A handler that leaves a hook by siglongjmp (from the CUDA call in
// it, where signals are not put aside) abandons its hold: the thread's cancellation then stays
// disabled, as the hold left it (a limit, said in the README).
#pragma once

#include <pthread.h>

#include "common/caller_hold.h"
#include "common/thread_context.h"

namespace cmt {

class HookHold {
 public:
  HookHold() noexcept : outer_(t_current) {
    hold_.hold();  // inside another hook's hold (a handler's hook), it saves and gives back that
    t_current = this;
  }
  // The program's cancellation state back; what was put aside acts here. Not noexcept.
  void leave() {
    if (left_) return;
    left_ = true;
    t_current = outer_;
    hold_.release();
  }
  ~HookHold() {
    if (left_) return;
    // Only reached when leave() was not (nothing unwinds through a held hook): the state back.
    t_current = outer_;
    pthread_setcanceltype(hold_.cancel_type, nullptr);
    pthread_setcancelstate(hold_.cancel_state, nullptr);
  }
  HookHold(const HookHold&) = delete;
  HookHold& operator=(const HookHold&) = delete;

  // The hold of the hook running on this thread: set by each hook as it starts, so one a jump
  // abandoned is never named once another hook has started, and only a hook's code asks.
  static CallerHold* current() noexcept { return t_current ? &t_current->hold_ : nullptr; }

 private:
  static inline thread_local HookHold* t_current = nullptr;
  HookHold* const outer_;
  CallerHold hold_;
  bool left_ = false;
};

// Hook function F (a handler of hooks/hook_shapes.h's shapes) under a HookHold, left on the way
// out: HeldHook<&F>::call is what a program reaches, through an exported name or a pointer cmt
// hands out in place of the driver's (cuGetProcAddress, dlsym).
template <auto F>
struct HeldHook;
template <typename R, typename... A, R (*F)(A...)>
struct HeldHook<F> {
  static R call(A... args) {
    if (RuntimeHookScope::active()) return F(args...);  // inside a runtime hook's hold
    HookHold hold;
    const R result = F(args...);
    hold.leave();
    return result;
  }
};

}  // namespace cmt
