// What libcmt-host.so's hooks share (libc_hooks.cpp: the copies and fills; signal_hooks.cpp:
// sigaction and its relatives): the engine's host-leg table, handed over when libcmt.so loads the
// engine, and the signal functions below the library's own, found by the library's constructor.
// Hidden: the library's version script exports only the hooks and the attach.
#pragma once

#include <atomic>

#include "hooks/host_leg_abi.h"

namespace cmt::hooks {

// The engine's table; null until libcmt.so has loaded the engine (never, without libcmt.so).
extern std::atomic<const HostLegAbi*> g_host_leg;

// The next sigaction (libc's, or another preload's); found by the constructor.
extern SigactionFn g_next_sigaction;

// Finds the signal functions below libcmt-host.so's, at the C library's `version`.
void find_signal_functions(const char* version) noexcept;

}  // namespace cmt::hooks
