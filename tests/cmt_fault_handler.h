// cmt's SIGSEGV/SIGBUS handler put in front over libc's own sigaction, as libcmt-host.so gives it
// and as the host leg has it before it builds a copier: the tests that fault a guarded copy or read
// (engine/shared/fault_guard.h) need it.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "interposer/signal_chain.h"

namespace cmt {

inline void install_cmt_handler() {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  set_next_sigaction(reinterpret_cast<SigactionFn>(dlsym(libc, "sigaction")));
  ASSERT_TRUE(install_signal_chain());
  ASSERT_TRUE(fault_handlers_in_front());
}

}  // namespace cmt
