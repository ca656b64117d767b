// The C library's own dlsym. libcmt.so exports a dlsym hook (hooks/dlsym_hook.cpp), so cmt's code
// must never call plain dlsym for lookups it depends on: that would come back through the hook.
// This one is found once with dlvsym, which cmt does not hook, newest glibc version first.
//
// And "the definition after cmt's", which libcmt-engine.so cannot ask with RTLD_NEXT: it is opened
// with RTLD_LOCAL by libcmt.so (hooks/engine_link.h), and from a local scope RTLD_NEXT searches
// that scope alone. libcmt.so answers for it.
#pragma once

namespace cmt {

// Same contract as dlsym(3). RTLD_NEXT is relative to the object that calls this function.
void* real_dlsym(void* handle, const char* name);

// The C library's dlsym itself (nullptr if it cannot be found), for the hook to jump to.
void* libc_dlsym_address();

// dlsym(RTLD_NEXT, name) as the preloaded libcmt.so sees it: the definition a program reaches
// without cmt. Asks `finder` once set_next_symbol_finder has given one (libcmt.so, through
// hooks/engine_link.h), otherwise RTLD_NEXT from this object.
using NextSymbolFinder = void* (*)(const char* name) noexcept;
void set_next_symbol_finder(NextSymbolFinder finder);
void* next_symbol(const char* name);

}  // namespace cmt
