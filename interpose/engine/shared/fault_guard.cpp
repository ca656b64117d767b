#include "engine/shared/fault_guard.h"

#include <setjmp.h>

#include <atomic>

namespace cmt {
namespace {

// The calling thread's way back, null outside a guard. Initial-exec TLS: read in a signal handler.
thread_local sigjmp_buf* t_way_back __attribute__((tls_model("initial-exec"))) = nullptr;

}  // namespace

bool run_fault_guarded(void (*fn)(void*), void* arg) noexcept {
  sigjmp_buf way_back;
  // No mask saved (that would be a system call per unit): the handler is installed with
  // SA_NODEFER and an empty mask, so the thread's mask is the same in it as here.
  if (sigsetjmp(way_back, 0) != 0) {
    t_way_back = nullptr;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return false;
  }
  t_way_back = &way_back;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  fn(arg);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_way_back = nullptr;
  return true;
}

bool inside_fault_guard() noexcept {
  return t_way_back != nullptr;
}

void leave_fault_guard(const siginfo_t* info) noexcept {
  sigjmp_buf* way_back = t_way_back;
  // si_code > 0: raised by the kernel for this thread's own access; SI_USER, SI_TKILL and the
  // like (<= 0) are signals sent by someone, which are the program's business.
  if (!way_back || !info || info->si_code <= 0) return;
  siglongjmp(*way_back, 1);
}

}  // namespace cmt
