#include "interposer/signal_chain.h"

#include <errno.h>
#include <pthread.h>
#include <ucontext.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>

#include "common/thread_context.h"
#include "engine/shared/fault_guard.h"

namespace cmt {
namespace {

constexpr int kSignals = 65;  // 1..64

// The program's disposition of one signal, kept once the chain is installed. Written under the
// lock; the handler reads it without (a sequence count tells a torn read), since it may interrupt
// a thread that holds the lock on another core.
struct Disposition {
  std::atomic<unsigned> seq{0};  // odd while being written
  struct sigaction action {};
};

Disposition g_program[kSignals];
std::atomic<bool> g_installed{false};
std::atomic<bool> g_locked{false};
std::atomic<SigactionFn> g_next{nullptr};

// The calling thread's hold while cmt copies for it: signals it handles are put aside there.
thread_local CallerHold* t_hold __attribute__((tls_model("initial-exec"))) = nullptr;

bool is_fault_signal(int sig) {
  return sig == SIGSEGV || sig == SIGBUS;
}

// Signals a program may handle: not SIGKILL or SIGSTOP, nor glibc's own two (cancellation and
// setxid), which its sigaction refuses.
bool catchable(int sig) {
  return sig > 0 && sig < kSignals && sig != SIGKILL && sig != SIGSTOP &&
         !(sig >= 32 && sig < SIGRTMIN);
}

// A fault of the thread's own instruction (raised by the kernel, not sent): putting it aside would
// return to the instruction and raise it again.
bool synchronous(int sig, const siginfo_t* info) {
  return (sig == SIGILL || sig == SIGFPE || sig == SIGTRAP || sig == SIGSYS) && info &&
         info->si_code > 0;
}

bool has_handler(const struct sigaction& a) {
  return a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN;  // the field is shared with SIGINFO's
}

// Held with every signal that can be blocked blocked, so no handler on this thread waits for it.
class ChainLock {
 public:
  ChainLock() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old_);
    while (g_locked.exchange(true, std::memory_order_acquire)) {
    }
  }
  ~ChainLock() {
    g_locked.store(false, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ChainLock(const ChainLock&) = delete;
  ChainLock& operator=(const ChainLock&) = delete;

 private:
  sigset_t old_;
};

void write_program(int sig, const struct sigaction& act) {
  Disposition& d = g_program[sig];
  d.seq.fetch_add(1, std::memory_order_acq_rel);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  d.action = act;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  d.seq.fetch_add(1, std::memory_order_acq_rel);
}

struct sigaction read_program(int sig) {
  const Disposition& d = g_program[sig];
  for (;;) {
    const unsigned before = d.seq.load(std::memory_order_acquire);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    struct sigaction copy = d.action;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!(before & 1) && d.seq.load(std::memory_order_acquire) == before) return copy;
  }
}

void on_signal(int sig, siginfo_t* info, void* context);

// What is installed for `sig` when the program's disposition is `program`. SIGSEGV and SIGBUS:
// cmt's handler with an empty mask and SA_NODEFER (a guarded copy jumps out without restoring a
// mask), the program's mask applied by hand. Another signal with a handler: cmt's, with the
// program's mask and flags, so the kernel applies them; without one: the program's as it is.
struct sigaction installed_for(int sig, const struct sigaction& program) {
  struct sigaction ours = program;
  if (is_fault_signal(sig)) {
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | (program.sa_flags & SA_ONSTACK);
  } else if (has_handler(program)) {
    ours.sa_flags = (program.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
  } else {
    return program;
  }
  ours.sa_sigaction = on_signal;
  return ours;
}

bool is_cmt(const struct sigaction& a) {
  return (a.sa_flags & SA_SIGINFO) && a.sa_sigaction == on_signal;
}

void install_real(int sig, const struct sigaction& act) {
  if (SigactionFn next = g_next.load(std::memory_order_acquire)) next(sig, &act, nullptr);
}

// The program's disposition becomes SIG_DFL (SA_RESETHAND, or a fault on the way to the default
// action), and so does what is installed.
void reset_to_default(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ChainLock lock;
  write_program(sig, dfl);
  if (!is_fault_signal(sig)) install_real(sig, dfl);
}

// What the kernel would have done with the program's disposition `p` of SIGSEGV or SIGBUS.
void deliver_fault(int sig, siginfo_t* info, void* context, const struct sigaction& p) {
  const bool fault = info && info->si_code > 0;
  if (!has_handler(p)) {
    // Ignored: a sent signal is dropped, a fault kills anyway (the kernel's rule). Default: the
    // default action, taken by the fault's return to the faulting instruction or by a re-send.
    if (p.sa_handler == SIG_IGN && !fault) return;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    install_real(sig, dfl);
    if (!fault) raise(sig);
    return;
  }
  if (p.sa_flags & SA_RESETHAND) reset_to_default(sig);
  sigset_t mask = p.sa_mask;
  if (!(p.sa_flags & SA_NODEFER)) sigaddset(&mask, sig);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);  // sigreturn restores the mask from the context
  if (p.sa_flags & SA_SIGINFO)
    p.sa_sigaction(sig, info, context);
  else
    p.sa_handler(sig);
}

// Another signal: the kernel has applied the program's mask already.
void deliver(int sig, siginfo_t* info, void* context, const struct sigaction& p) {
  if (!has_handler(p)) {  // changed since the kernel delivered it
    if (p.sa_handler == SIG_DFL) {
      install_real(sig, p);
      raise(sig);
    }
    return;
  }
  if (p.sa_flags & SA_RESETHAND) reset_to_default(sig);
  if (p.sa_flags & SA_SIGINFO)
    p.sa_sigaction(sig, info, context);
  else
    p.sa_handler(sig);
}

// The hold deferring on this thread, unless a jump abandoned it: a handler that left a held call
// by siglongjmp from a fault of the caller's own (never put aside) pops the hold's frame with
// t_hold still naming it. A live hold lies above the stack pointer the signal interrupted (the
// stack grows down); one below it is gone, and its memory may be another frame's now.
CallerHold* live_hold(void* context) {
  CallerHold* const hold = t_hold;
#if defined(__x86_64__)
  if (hold && context) {
    const auto* uc = static_cast<const ucontext_t*>(context);
    const auto sp = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
    if (reinterpret_cast<std::uintptr_t>(hold) < sp) {
      t_hold = nullptr;
      return nullptr;
    }
  }
#endif
  return hold;
}

void on_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (is_fault_signal(sig)) {
    leave_fault_guard(info);  // a guarded copy's fault: back to it, never returns here
    if (t_thread.copy_thread && info && info->si_code > 0) {
      // A fault on one of cmt's threads outside a guard: never the program's handler on a thread
      // that is not its own; the default action, as before cmt stood in front.
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      install_real(sig, dfl);
      return;
    }
    deliver_fault(sig, info, context, read_program(sig));
  } else if (CallerHold* hold = live_hold(context); hold && info && !synchronous(sig, info) &&
                                                    hold->deferred < CallerHold::kMostDeferred) {
    // cmt's threads are writing this thread's buffers: the handler runs once they are done.
    hold->pending[hold->deferred].sig = sig;
    hold->pending[hold->deferred].info = *info;
    ++hold->deferred;
  } else {
    deliver(sig, info, context, read_program(sig));
  }
  errno = saved_errno;
}

// Takes over one signal's disposition at installation; false if SIGSEGV/SIGBUS cannot be fronted.
bool take_over(int sig, SigactionFn next) {
  struct sigaction current {};
  if (next(sig, nullptr, &current) != 0) return !is_fault_signal(sig);
  if (!is_cmt(current)) write_program(sig, current);
  const struct sigaction mine = installed_for(sig, read_program(sig));
  if (!is_cmt(mine)) return true;  // default or ignored: left as it is
  return next(sig, &mine, nullptr) == 0 || !is_fault_signal(sig);
}

}  // namespace

void set_next_sigaction(SigactionFn next) noexcept {
  g_next.store(next, std::memory_order_release);
}

bool install_signal_chain() noexcept {
  SigactionFn next = g_next.load(std::memory_order_acquire);
  if (!next) return false;
  ChainLock lock;
  if (g_installed.load(std::memory_order_relaxed)) return true;
  bool faults = true;
  for (int sig = 1; sig < kSignals; ++sig)
    if (catchable(sig) && !take_over(sig, next) && is_fault_signal(sig)) faults = false;
  g_installed.store(true, std::memory_order_release);
  return faults;
}

bool fault_handlers_in_front() noexcept {
  SigactionFn next = g_next.load(std::memory_order_acquire);
  if (!next) return false;
  for (int sig : {SIGSEGV, SIGBUS}) {
    struct sigaction current {};
    if (next(sig, nullptr, &current) != 0 || !is_cmt(current)) return false;
  }
  return true;
}

int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  SigactionFn next = g_next.load(std::memory_order_acquire);
  if (!next) {
    errno = ENOSYS;
    return -1;
  }
  if (!catchable(sig) || !g_installed.load(std::memory_order_acquire))
    return next(sig, act, old);
  struct sigaction wanted {};
  if (act) wanted = *act;  // read before the lock: a bad pointer faults here, holding nothing
  struct sigaction was {};
  {
    ChainLock lock;
    was = read_program(sig);
    if (act) {
      const struct sigaction real = installed_for(sig, wanted);
      if (next(sig, &real, nullptr) != 0) return -1;  // refused (errno set): nothing changed
      write_program(sig, wanted);
    }
  }
  if (old) *old = was;
  return 0;
}

CallerHold* begin_deferring(CallerHold* hold) noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  CallerHold* const outer = t_hold;
  t_hold = hold;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return outer;
}

void end_deferring(CallerHold* outer) noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_hold = outer;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

}  // namespace cmt
