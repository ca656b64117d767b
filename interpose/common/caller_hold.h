// The calling thread held while cmt's copy threads work on its buffers (issue 31, finding 2): no
// signal handler may run on it and leave the call by siglongjmp, and no cancellation unwind it,
// while a copy thread still writes its memory. Cancellation is disabled (and deferred); a signal the program
// handles that arrives meanwhile is put aside here by cmt's handler (interposer/signal_chain.h)
// and sent again to this thread, with its own siginfo, when the hold is released. Synchronous
// faults of the caller's own are never put aside. No signal mask changes: a process-directed
// signal still goes to the thread the kernel picks, as without cmt.
//
// The hook (hooks/libc_hooks.cpp, in libcmt-host.so) holds the thread before it calls the host
// leg (interposer/host_leg.h, in libcmt.so), which puts signals aside once it takes the call, and
// releases it once libcmt.so has returned. A cancellation or a signal then acts from the hook's frame, which may be unwound or
// left by siglongjmp, never from inside libcmt.so, whose frames may not be unwound (a
// cancellation's unwinding through a noexcept frame ends the process).
#pragma once

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cmt {

struct CallerHold {
  static constexpr int kMostDeferred = 8;
  struct Deferred {
    int sig;
    siginfo_t info;
  };

  bool held = false;
  int cancel_state = PTHREAD_CANCEL_ENABLE;
  int cancel_type = PTHREAD_CANCEL_DEFERRED;
  int deferred = 0;
  Deferred pending[kMostDeferred];

  // The hooks hold the thread before they call into libcmt.so at all, not only once it takes
  // the call: an asynchronous cancellation (PTHREAD_CANCEL_ASYNCHRONOUS) acts at any
  // instruction, and one acting inside libcmt.so's noexcept frames ended the process
  // ("terminate called without an active exception", host_faults' cancel scenario under load,
  // bench/lab/NOTES.md 67). The type is made deferred as well as the state disabled: glibc 2.36's
  // cancellation signal handler looks only at the type, so a cancellation whose signal was sent
  // just before the state changed still acted, inside libcmt.so; made deferred, the handler only
  // marks the thread cancelled, and the cancellation acts at the release. The host leg's own
  // hold is then a no-op.
  void hold() noexcept {
    if (held) return;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &cancel_type);
    held = true;
  }
  // Not noexcept, and to be called only from a frame a cancellation may unwind: a cancellation
  // that arrived while held acts here, and then the signals put aside run their handlers.
  void release() {
    if (!held) return;
    held = false;
    pthread_setcanceltype(cancel_type, nullptr);
    pthread_setcancelstate(cancel_state, nullptr);
    const int n = deferred;
    deferred = 0;
    if (n == 0) return;  // the usual case: no system call (every declined memcpy comes here)
    const long pid = getpid(), tid = syscall(SYS_gettid);
    for (int i = 0; i < n; ++i)
      syscall(SYS_rt_tgsigqueueinfo, pid, tid, pending[i].sig, &pending[i].info);
  }
};

}  // namespace cmt
