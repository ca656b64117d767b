// A stretch of copying that survives a fault. cmt's copy threads read and write the program's
// memory, which the program may legitimately guard (PROT_NONE), make read-only or back with a file
// it truncates; without cmt the fault would hit the program's own thread, in libc's memcpy, and
// the program's handler would deal with it. On a copy thread a fault must not kill the process
// nor run the program's handler on the wrong thread: the copy is run under a guard, a SIGSEGV or
// SIGBUS the kernel raises inside it jumps back out, and the caller hands the part left to libc
// on the program's thread, where the fault happens again, as it would have without cmt.
//
// The guard only catches: the process's handler for SIGSEGV and SIGBUS must be cmt's and call
// leave_fault_guard() first (interposer/signal_chain.h installs it). Code run under a guard must
// hold no resource a jump would leak: plain memcpy, memset and copy kernels.
#pragma once

#include <signal.h>

namespace cmt {

// Runs fn(arg) on the calling thread; false if a fault in it was caught (fn stopped part-way).
bool run_fault_guarded(void (*fn)(void*), void* arg) noexcept;

// Whether the calling thread is inside run_fault_guarded now.
bool inside_fault_guard() noexcept;

// For the process's SIGSEGV/SIGBUS handler: when the calling thread is inside a guard and the
// kernel raised the signal (a fault, not a kill), jumps back to run_fault_guarded, which returns
// false; otherwise returns.
void leave_fault_guard(const siginfo_t* info) noexcept;

}  // namespace cmt
