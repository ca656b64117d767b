// The CUDA runtime functions that libcmt.so's hooks stand in front of, resolved once each: the
// next definition after libcmt.so in the global scope (cuda/real_dl.h's next_symbol), or, when the runtime was
// loaded privately (a Python extension's libcudart.so.13), the copy already loaded in the process.
#pragma once

namespace cmt {

// Returns the real function named `name`, or nullptr if no CUDA runtime in the process has it.
// Never loads a runtime that the process has not loaded.
void* real_runtime_symbol(const char* name);

}  // namespace cmt
