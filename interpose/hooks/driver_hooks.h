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

// True if `address` lies in libcmt.so itself.
bool is_libcmt_address(const void* address);

}  // namespace cmt
