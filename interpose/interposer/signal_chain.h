// cmt's signal handler, in front of the program's own. Two jobs need it:
//
// Faults. The host leg's copy threads touch the program's memory, and a fault there must come
// back to the program as it would without cmt (engine/shared/fault_guard.h). For SIGSEGV and
// SIGBUS cmt's handler is always in front: it first lets a guarded copy jump out, and otherwise
// delivers the signal as the kernel would have to the program's disposition (its handler with its
// mask and flags, the default action, or ignored).
//
// Signals during a taken call. While cmt's threads write a caller's buffers, no handler may run on
// the caller and leave the call (siglongjmp) with the threads still writing. For every signal the
// program handles, cmt's handler stands in front too: one arriving on a caller that is held
// (common/caller_hold.h) is put aside with its siginfo and sent again to the same thread, with the
// same siginfo, once the call is done (rt_tgsigqueueinfo), where the program's handler runs as it
// would have a moment earlier. No signal mask changes, so a process-directed signal still goes to
// the thread the kernel picks (a held caller included), as without cmt. Default and ignored
// dispositions are installed as they are: they run no handler.
//
// To stay in front, the program's sigaction, signal and their relatives are answered here
// (hooks/signal_hooks.cpp, in libcmt-host.so): the program sees and sets its own dispositions,
// never cmt's; the JVM's libjsig does the same. A handler installed past libc (a raw system call)
// displaces cmt's: for SIGSEGV/SIGBUS fault_handlers_in_front() tells, and the host leg then leaves
// its copies to libc; for another signal that handler runs at once, as it would without cmt.
#pragma once

#include <signal.h>

#include "common/caller_hold.h"

namespace cmt {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

// The sigaction below the hooks (libc's, or the next preload's), given once by libcmt-host.so.
void set_next_sigaction(SigactionFn next) noexcept;

// Puts cmt's handler in front (once): for SIGSEGV and SIGBUS, and for every signal the program has
// a handler for; from then on the program's dispositions are kept here. True when it is in front
// of SIGSEGV and SIGBUS.
bool install_signal_chain() noexcept;

// Asks the kernel whether cmt's handler is still the one installed for SIGSEGV and SIGBUS.
bool fault_handlers_in_front() noexcept;

// sigaction as the program sees it: once the chain is installed, every disposition the program
// reads or sets is its own, kept here, while cmt's handler stays in front where it must.
// Before that, and for signals that cannot be caught, the next sigaction's answer.
int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept;

// From now until end_deferring(), a signal the program handles that arrives on this thread is put
// aside in `hold` (whose release() sends it again). Returns the hold that was deferring before
// (null if none), for end_deferring to put back: holds nest (a copy hook's, then a host-leg
// hook's inside it), and an inner one's end leaves the outer one deferring.
CallerHold* begin_deferring(CallerHold* hold) noexcept;
void end_deferring(CallerHold* outer = nullptr) noexcept;

}  // namespace cmt
