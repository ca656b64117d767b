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
// The hold is taken at the outermost hook frame only (a hook reached from another, cudart's
// driver call under a runtime hook, finds it taken), and left by leave() as the last thing before
// returning to the program: a cancellation or a handler acts from there, where no frame of cmt's
// holds anything.
#pragma once

#include "common/caller_hold.h"

namespace cmt {

class HookHold {
 public:
  HookHold() noexcept {
    if (t_outermost) return;
    hold_.hold();
    t_outermost = &hold_;
    owner_ = true;
  }
  // The program's cancellation state back; what was put aside acts here. Not noexcept.
  void leave() {
    if (!owner_) return;
    owner_ = false;
    t_outermost = nullptr;
    hold_.release();
  }
  ~HookHold() {
    if (!owner_) return;  // left (or not the outermost): nothing
    // Only reached when leave() was not (nothing unwinds through a held hook): the state back.
    t_outermost = nullptr;
    pthread_setcanceltype(hold_.cancel_type, nullptr);
    pthread_setcancelstate(hold_.cancel_state, nullptr);
  }
  HookHold(const HookHold&) = delete;
  HookHold& operator=(const HookHold&) = delete;

  // The outermost hook's hold on this thread, if a hook is running on it.
  static CallerHold* current() noexcept { return t_outermost; }

 private:
  static inline thread_local CallerHold* t_outermost __attribute__((tls_model("initial-exec"))) =
      nullptr;
  CallerHold hold_;
  bool owner_ = false;
};

// Hook function F (a handler of hooks/hook_shapes.h's shapes) under a HookHold, left on the way
// out: HeldHook<&F>::call is what a program reaches, through an exported name or a pointer cmt
// hands out in place of the driver's (cuGetProcAddress, dlsym).
template <auto F>
struct HeldHook;
template <typename R, typename... A, R (*F)(A...)>
struct HeldHook<F> {
  static R call(A... args) {
    HookHold hold;
    const R result = F(args...);
    hold.leave();
    return result;
  }
};

}  // namespace cmt
