// cmt's hooks of the CUDA driver's copy entry points (cuMemcpyHtoD_v2, ..._ptds, cuMemcpyAsync,
// ...) and of cuGetProcAddress, which is how cudart (static or dynamic) and XLA find driver
// functions. A hook is handed out only in place of the exact libcuda variant it mirrors.
#pragma once

namespace cmt {

// dlsym(handle, name) returned `found`, from an object other than libcmt.so. Returns cmt's hook
// for `name` if cmt has a hook of exactly that entry point (then the hook forwards to `found`),
// otherwise `found` itself. Not for RTLD_NEXT lookups.
void* driver_hook_for_symbol(const char* name, void* found);

// True if `name` is one of the driver entry points cmt hooks (cheap; for dlsym's fast path).
bool is_hooked_driver_symbol(const char* name);

// True if `name` is a symbol libcmt.so exports in the CUDA runtime's name (cudaMemcpy, ...).
bool is_hooked_runtime_symbol(const char* name);

// True if `address` lies in cmt's own code: libcmt-engine.so, or libcmt.so once
// set_front_address_test has said how to tell.
bool is_libcmt_address(const void* address);

using FrontAddressTest = bool (*)(const void* address) noexcept;
void set_front_address_test(FrontAddressTest in_front);

// libcmt.so's dlsym hook asks this for the names above (hooks/engine_link.h's dlsym_decide):
// 1 with *answer set when cmt answers the lookup itself, 0 to hand it to the C library.
int decide_dlsym(void* handle, const char* name, void** answer) noexcept;

}  // namespace cmt
