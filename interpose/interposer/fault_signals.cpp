#include "interposer/fault_signals.h"

#include <errno.h>
#include <pthread.h>

#include <atomic>

#include "common/thread_context.h"
#include "engine/shared/fault_guard.h"

namespace cmt {
namespace {

// One of the two signals cmt stands in front of: the program's disposition, and a lock for those
// who change it. The handler reads the disposition without the lock (a sequence count tells a
// torn read), since it may interrupt a thread that holds it.
struct Chain {
  int sig;
  std::atomic<bool> installed{false};
  std::atomic<unsigned> seq{0};  // odd while the disposition is being written
  struct sigaction program {};
  std::atomic<bool> locked{false};
};

Chain g_chains[2] = {{SIGSEGV}, {SIGBUS}};
std::atomic<SigactionFn> g_next{nullptr};

Chain* chain_of(int sig) {
  for (Chain& c : g_chains)
    if (c.sig == sig) return &c;
  return nullptr;
}

// Held with every signal that can be blocked blocked, so no handler on this thread waits for it.
class ChainLock {
 public:
  explicit ChainLock(Chain& c) : c_(c) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old_);
    while (c_.locked.exchange(true, std::memory_order_acquire)) {
    }
  }
  ~ChainLock() {
    c_.locked.store(false, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ChainLock(const ChainLock&) = delete;
  ChainLock& operator=(const ChainLock&) = delete;

 private:
  Chain& c_;
  sigset_t old_;
};

void write_program(Chain& c, const struct sigaction& act) {
  c.seq.fetch_add(1, std::memory_order_acq_rel);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  c.program = act;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  c.seq.fetch_add(1, std::memory_order_acq_rel);
}

struct sigaction read_program(Chain& c) {
  for (;;) {
    const unsigned before = c.seq.load(std::memory_order_acquire);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    struct sigaction copy = c.program;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!(before & 1) && c.seq.load(std::memory_order_acquire) == before) return copy;
  }
}

void on_fault(int sig, siginfo_t* info, void* context);

// cmt's handler as installed: an empty mask and SA_NODEFER, so the thread's mask inside it is what
// it was (a guarded copy jumps out without restoring one); the program's alternate-stack wish.
struct sigaction cmt_action(const struct sigaction& program) {
  struct sigaction ours {};
  ours.sa_sigaction = on_fault;
  sigemptyset(&ours.sa_mask);
  ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | (program.sa_flags & SA_ONSTACK);
  return ours;
}

bool is_cmt(const struct sigaction& a) {
  return (a.sa_flags & SA_SIGINFO) && a.sa_sigaction == on_fault;
}

// The default action for `sig` from now on (the process is about to die of it).
void reset_to_default(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  if (SigactionFn next = g_next.load(std::memory_order_acquire)) next(sig, &dfl, nullptr);
}

// What the kernel would have done with the program's disposition `p`.
void deliver(Chain& c, siginfo_t* info, void* context, const struct sigaction& p) {
  const bool fault = info && info->si_code > 0;
  // The kernel reads the handler field alike with or without SA_SIGINFO.
  if (p.sa_handler == SIG_DFL || p.sa_handler == SIG_IGN) {
    // Ignored: a sent signal is dropped, a fault kills anyway (the kernel's rule). Default: the
    // default action, taken by the fault's return to the faulting instruction or by a re-send.
    if (p.sa_handler == SIG_IGN && !fault) return;
    reset_to_default(c.sig);
    if (!fault) raise(c.sig);
    return;
  }
  if (p.sa_flags & SA_RESETHAND) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ChainLock lock(c);
    write_program(c, dfl);
  }
  sigset_t mask = p.sa_mask;
  if (!(p.sa_flags & SA_NODEFER)) sigaddset(&mask, c.sig);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);  // sigreturn restores the mask from the context
  if (p.sa_flags & SA_SIGINFO)
    p.sa_sigaction(c.sig, info, context);
  else
    p.sa_handler(c.sig);
}

void on_fault(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  leave_fault_guard(info);  // a guarded copy's fault: back to it, never returns here
  Chain* c = chain_of(sig);
  if (!c) return;
  if (t_thread.copy_thread && info && info->si_code > 0) {
    // A fault on one of cmt's threads outside a guard: never the program's handler on a thread
    // that is not its own; the default action, as before cmt stood in front.
    reset_to_default(sig);
    return;
  }
  deliver(*c, info, context, read_program(*c));
  errno = saved_errno;
}

bool install(Chain& c) {
  SigactionFn next = g_next.load(std::memory_order_acquire);
  if (!next) return false;
  ChainLock lock(c);
  if (c.installed.load(std::memory_order_relaxed)) return true;
  struct sigaction current {};
  if (next(c.sig, nullptr, &current) != 0) return false;
  if (!is_cmt(current)) write_program(c, current);
  const struct sigaction ours = cmt_action(current);
  if (next(c.sig, &ours, nullptr) != 0) return false;
  c.installed.store(true, std::memory_order_release);
  return true;
}

}  // namespace

void set_next_sigaction(SigactionFn next) noexcept {
  g_next.store(next, std::memory_order_release);
}

bool install_fault_handlers() noexcept {
  bool ok = true;
  for (Chain& c : g_chains) ok = install(c) && ok;
  return ok;
}

bool fault_handlers_in_front() noexcept {
  SigactionFn next = g_next.load(std::memory_order_acquire);
  if (!next) return false;
  for (Chain& c : g_chains) {
    struct sigaction current {};
    if (next(c.sig, nullptr, &current) != 0 || !is_cmt(current)) return false;
  }
  return true;
}

int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  SigactionFn next = g_next.load(std::memory_order_acquire);
  Chain* c = chain_of(sig);
  if (!c || !c->installed.load(std::memory_order_acquire)) {
    if (next) return next(sig, act, old);
    errno = ENOSYS;
    return -1;
  }
  struct sigaction wanted {};
  if (act) wanted = *act;  // read before the lock: a bad pointer faults here, holding nothing
  struct sigaction was {};
  {
    ChainLock lock(*c);
    was = read_program(*c);
    if (act) {
      write_program(*c, wanted);
      // Keep cmt's handler in front, on the alternate stack if the program now wants one.
      if ((was.sa_flags ^ wanted.sa_flags) & SA_ONSTACK) {
        const struct sigaction ours = cmt_action(wanted);
        next(sig, &ours, nullptr);
      }
    }
  }
  if (old) *old = was;
  return 0;
}

}  // namespace cmt
