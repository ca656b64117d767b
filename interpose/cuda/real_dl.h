// The C library's own dlsym. libcmt.so exports a dlsym hook (dlsym_hook.cpp), so cmt's code must
// never call plain dlsym for lookups it depends on: that would come back through the hook. This
// one is found once with dlvsym, which cmt does not hook, newest glibc version first.
#pragma once

namespace cmt {

// Same contract as dlsym(3). RTLD_NEXT is relative to the object that calls this function.
void* real_dlsym(void* handle, const char* name);

// The C library's dlsym itself (nullptr if it cannot be found), for the hook to jump to.
void* libc_dlsym_address();

}  // namespace cmt
