// cmt's handler for SIGSEGV and SIGBUS, in front of the program's. The host leg's copy threads
// touch the program's memory, and a fault there must come back to the program as it would without
// cmt (engine/shared/fault_guard.h): the handler first lets a guarded copy jump out, and otherwise
// delivers the signal as the kernel would have to the program's own disposition (its handler with
// its mask and flags, the default action, or ignored), which it keeps for the program.
//
// To stay in front, the program's sigaction, signal and their relatives for these two signals are
// answered here (hooks/signal_hooks.cpp, in libcmt-host.so): the program sees and changes its own
// disposition, never cmt's. The same arrangement as the JVM's libjsig. A program that installs a
// handler past libc (a raw system call) displaces cmt's; fault_handlers_in_front() tells, and the
// host leg then leaves its copies to libc.
#pragma once

#include <signal.h>

namespace cmt {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

// The sigaction below the hooks (libc's, or the next preload's), given once by libcmt-host.so.
void set_next_sigaction(SigactionFn next) noexcept;

// Puts cmt's handler in front for SIGSEGV and SIGBUS (once; what was there becomes the program's
// disposition). True when it is in front of both.
bool install_fault_handlers() noexcept;

// Asks the kernel whether cmt's handler is still the one installed for both signals.
bool fault_handlers_in_front() noexcept;

// sigaction as the program sees it: for SIGSEGV and SIGBUS, once cmt's handler is in front, the
// program's own disposition is read and replaced here while cmt's stays installed; everything else
// goes to the next sigaction.
int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept;

}  // namespace cmt
