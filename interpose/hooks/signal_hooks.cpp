// libcmt-host.so's signal hooks: sigaction and the signal() family, answered by the engine
// (interposer/signal_chain.h) so that cmt's handler stays in front where it must (SIGSEGV and
// SIGBUS always, every signal the program handles once the host leg is armed) and the program
// still sees and sets its own dispositions. Until libcmt.so has loaded the engine (and without
// libcmt.so) every call goes to the next function as if cmt were not there.
//
// glibc's signal(), bsd_signal() and ssignal() install with SA_RESTART and the signal blocked in
// its handler; sysv_signal() with SA_RESETHAND and SA_NODEFER. They call glibc's internal
// sigaction, past any hook, so they are hooked too and given those meanings here. sigset() is not
// (obsolete, with a blocked-signal mode of its own): a program that uses it for SIGSEGV displaces
// cmt's handler, which the host leg notices and then leaves every copy to libc.
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>

#include "hooks/host_library.h"

namespace cmt::hooks {

SigactionFn g_next_sigaction = nullptr;

namespace {

using SignalFn = sighandler_t (*)(int, sighandler_t);
SignalFn g_next_signal = nullptr;
SignalFn g_next_sysv_signal = nullptr;

// libcmt.so decides, for every signal: it passes what it does not keep to the next sigaction.
// The engine's table where it answers for the program's signals, else null.
const HostLegAbi* cmt_answers(int) {
  return g_host_leg.load(std::memory_order_acquire);
}

// The next sigaction, found now if the constructor has not run yet (a library initialised first).
SigactionFn next_sigaction() {
  if (!g_next_sigaction)
    g_next_sigaction = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
  return g_next_sigaction;
}

// signal() and its relatives through libcmt.so: `flags` and, unless SA_NODEFER, the signal
// blocked in its handler; returns the old handler or SIG_ERR.
sighandler_t answer_signal(int sig, sighandler_t handler, int flags) {
  if (handler == SIG_ERR || sig < 1 || sig >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction act {}, old {};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  if (!(flags & SA_NODEFER)) sigaddset(&act.sa_mask, sig);
  act.sa_flags = flags;
  if (cmt_answers(sig)->sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

sighandler_t forward_signal(SignalFn& next, const char* name, int sig, sighandler_t handler) {
  if (!next) next = reinterpret_cast<SignalFn>(dlsym(RTLD_NEXT, name));
  if (!next) {
    errno = ENOSYS;
    return SIG_ERR;
  }
  return next(sig, handler);
}

}  // namespace

void find_signal_functions(const char* version) noexcept {
  if (void* fn = dlvsym(RTLD_NEXT, "sigaction", version))
    g_next_sigaction = reinterpret_cast<SigactionFn>(fn);
  if (void* fn = dlvsym(RTLD_NEXT, "signal", version))
    g_next_signal = reinterpret_cast<SignalFn>(fn);
  if (void* fn = dlvsym(RTLD_NEXT, "sysv_signal", version))
    g_next_sysv_signal = reinterpret_cast<SignalFn>(fn);
}

}  // namespace cmt::hooks

using cmt::hooks::answer_signal;
using cmt::hooks::cmt_answers;

#define CMT_LIBC_EXPORT extern "C" __attribute__((visibility("default")))

CMT_LIBC_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (const cmt::HostLegAbi* leg = cmt_answers(sig)) return leg->sigaction(sig, act, old);
  cmt::SigactionFn next = cmt::hooks::next_sigaction();
  if (!next) {
    errno = ENOSYS;
    return -1;
  }
  return next(sig, act, old);
}

CMT_LIBC_EXPORT int __sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return sigaction(sig, act, old);
}

CMT_LIBC_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  if (cmt_answers(sig)) return answer_signal(sig, handler, SA_RESTART);
  return cmt::hooks::forward_signal(cmt::hooks::g_next_signal, "signal", sig, handler);
}

CMT_LIBC_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) {
  return signal(sig, handler);
}

CMT_LIBC_EXPORT sighandler_t ssignal(int sig, sighandler_t handler) {
  return signal(sig, handler);
}

CMT_LIBC_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) {
  if (cmt_answers(sig)) return answer_signal(sig, handler, SA_RESETHAND | SA_NODEFER);
  return cmt::hooks::forward_signal(cmt::hooks::g_next_sysv_signal, "sysv_signal", sig, handler);
}

CMT_LIBC_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) {
  return sysv_signal(sig, handler);
}
