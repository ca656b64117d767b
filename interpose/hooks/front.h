// What libcmt.so's parts share (front.cpp: the forwarding exports and the engine's loading;
// dlsym_hook.cpp: the dlsym hook). Hidden: the library's version script exports only the hooks.
#pragma once

#include "hooks/engine_link.h"

namespace cmt::front {

using DlsymFn = void* (*)(void*, const char*);

// The C library's dlsym, found with dlvsym (which cmt does not hook); null if there is none.
DlsymFn libc_dlsym() noexcept;

// The engine, loaded on the first call (hooks/engine_link.h); null if it cannot be, or while the
// calling thread is the one loading it.
const EngineLink* engine() noexcept;

// Whether `name` is one of the CUDA entry points libcmt.so exports (cheap: dlsym's fast path).
bool is_hooked_name(const char* name) noexcept;

// Whether `address` lies in libcmt.so.
bool in_front(const void* address) noexcept;

// dlsym(RTLD_NEXT, name) as seen from libcmt.so.
void* next_symbol(const char* name) noexcept;

// Where export `row` goes: the engine's function of the same name, or, without an engine, the
// next definition (null if none).
void* target(int row) noexcept;

}  // namespace cmt::front
