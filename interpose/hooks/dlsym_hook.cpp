// libcmt.so's dlsym. Programs that never link cudart dynamically (nvcc's static cudart, XLA)
// open libcuda.so.1 themselves and look up cuGetProcAddress or cuMemcpy* with dlsym(handle, ...),
// which a preloaded definition of those names cannot intercept. This hook hands exactly those
// names to the engine's decision (hooks/engine_attach.cpp: cmt's hook in place of the libcuda
// variant it mirrors, "not found" where a global lookup would find only cmt's own export), and
// every other lookup to the C library's dlsym at the cost of two compares.
//
// It hands them over with a jump, not a call: glibc resolves RTLD_NEXT against its caller's
// return address, so the real dlsym must see the application's return address, not libcmt's.
// Hence the entry point is a few lines of assembly around a C++ decision; on other
// architectures libcmt.so does not hook dlsym at all.
#include <dlfcn.h>

#include "hooks/front.h"

#if defined(__x86_64__)

extern "C" {

// Where the assembly jumps when cmt does not answer; set before the first decision returns.
__attribute__((visibility("hidden"))) void* cmt_libc_dlsym = nullptr;

// Returns 1 with *answer set when cmt answers the lookup itself, 0 to hand it to the C library.
__attribute__((visibility("hidden"))) int cmt_dlsym_decide(void* handle, const char* name,
                                                           void** answer) {
  using namespace cmt::front;
  if (!cmt_libc_dlsym) cmt_libc_dlsym = reinterpret_cast<void*>(libc_dlsym());
  if (!cmt_libc_dlsym) {  // no C library dlsym to hand over to: answer as a failed lookup
    *answer = nullptr;
    return 1;
  }
  // RTLD_NEXT depends on the caller, which only the real dlsym sees.
  if (handle == RTLD_NEXT || !is_hooked_name(name)) return 0;
  if (const cmt::EngineLink* link = engine()) return link->dlsym_decide(handle, name, answer);
  // No engine: still no export of cmt's where a program probing for CUDA would find none.
  void* found = libc_dlsym()(handle, name);
  if (!found || !in_front(found) || next_symbol(name)) return 0;
  *answer = nullptr;
  return 1;
}

}  // extern "C"

namespace {

// Found when the library loads, so threads racing through their first dlsym only read it (the
// lazy lookup above covers calls made before this constructor runs).
__attribute__((constructor)) void find_libc_dlsym_early() {
  if (!cmt_libc_dlsym) cmt_libc_dlsym = reinterpret_cast<void*>(cmt::front::libc_dlsym());
}

}  // namespace

// dlsym(handle, name): keeps the stack 16-byte aligned around the call, passes a slot for the
// answer, and on "not mine" restores the arguments and jumps, so the C library's dlsym returns
// straight to the application.
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
  .p2align 4
dlsym:
  .cfi_startproc
  endbr64
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $24, %rsp
  .cfi_adjust_cfa_offset 24
  leaq 8(%rsp), %rdx
  call cmt_dlsym_decide
  testl %eax, %eax
  jz 1f
  movq 8(%rsp), %rax
  .cfi_remember_state
  addq $40, %rsp
  .cfi_adjust_cfa_offset -40
  ret
  .cfi_restore_state
1:
  addq $24, %rsp
  .cfi_adjust_cfa_offset -24
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  jmpq *cmt_libc_dlsym(%rip)
  .cfi_endproc
  .size dlsym, .-dlsym
)");

#endif  // __x86_64__
