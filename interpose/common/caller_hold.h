// The calling thread held still while cmt's copy threads work on its buffers: asynchronous
// signals blocked and cancellation disabled, so no handler can leave the call by siglongjmp, and
// no cancellation unwind it, while a copy thread still writes the caller's memory (issue 31,
// finding 2). Synchronous signals (a fault of the caller's own) stay deliverable: blocked, the
// kernel would kill the process for them.
//
// The host leg (interposer/host_leg.h, in libcmt.so) holds the thread once it takes a call; the
// hook that called it (hooks/libc_hooks.cpp, in libcmt-host.so) releases it once libcmt.so has
// returned. A cancellation or signal that arrived meanwhile then acts from the hook's frame,
// which may be unwound, and never from inside libcmt.so, whose frames may not (a cancellation's
// unwinding through a noexcept frame ends the process).
#pragma once

#include <pthread.h>
#include <signal.h>

namespace cmt {

struct CallerHold {
  bool held = false;
  int cancel_state = PTHREAD_CANCEL_ENABLE;
  sigset_t mask;

  void hold() noexcept {
    sigset_t async;
    sigfillset(&async);
    static constexpr int kSynchronous[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
    for (int sync : kSynchronous) sigdelset(&async, sync);
    pthread_sigmask(SIG_BLOCK, &async, &mask);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    held = true;
  }
  // Not noexcept, and to be called only from a frame a cancellation may unwind: a cancellation
  // that arrived while held acts here.
  void release() {
    if (!held) return;
    held = false;
    pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    pthread_setcancelstate(cancel_state, nullptr);
  }
};

}  // namespace cmt
