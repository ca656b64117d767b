// What libcmt-host.so's hooks share (libc_hooks.cpp: the copies and fills; signal_hooks.cpp:
// sigaction and its relatives): libcmt.so's host-leg table, found by the library's constructor,
// and the signal functions below the library's own, found by the same constructor. Hidden: the
// library's version script exports only the hooks.
#pragma once

#include "hooks/host_leg_abi.h"

namespace cmt::hooks {

// libcmt.so's table; null without libcmt.so, or until the constructor has run.
extern const HostLegAbi* g_host_leg;

// The next sigaction (libc's, or another preload's); found by the constructor.
extern SigactionFn g_next_sigaction;

// Finds the signal functions below libcmt-host.so's, at the C library's `version`.
void find_signal_functions(const char* version);

}  // namespace cmt::hooks
