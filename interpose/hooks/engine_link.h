// The one interface between libcmt.so, the small preload every process under `cmt run` loads
// (hooks/front.cpp), and libcmt-engine.so, which it loads on the first call of a CUDA entry point
// it hooks: everything else of cmt (the interposer, the engines, spdlog, the C++ runtime linked
// in). A process that never copies with CUDA never maps the engine, so starting one costs what
// mapping a small C library costs (issue 31, finding 5; bench/lab/NOTES.md 43).
//
// libcmt.so opens the engine with RTLD_LOCAL: the engine's exports of the hooked names (the rows
// of hook_table.h) are for libcmt.so's lookups only and interpose nothing. libcmt.so then hands it
// a FrontLink, because from inside a local scope RTLD_NEXT no longer means "the definition after
// cmt's": the engine asks the front for it. Both sides include this header.
#pragma once

namespace cmt {

inline constexpr unsigned kEngineLinkVersion = 1;
inline constexpr const char* kEngineAttachSymbol = "cmt_engine_attach";
inline constexpr const char* kEngineFileName = "libcmt-engine.so";

// What libcmt.so offers the engine. Valid for the life of the process.
struct FrontLink {
  unsigned version;  // kEngineLinkVersion
  // dlsym(RTLD_NEXT, name) as seen from libcmt.so: the definition a program would reach without
  // cmt (libcudart's, libcuda's, or another preload's).
  void* (*next_symbol)(const char* name) noexcept;
  // Whether `address` lies in libcmt.so: a global lookup of a hooked name finds the front's
  // export, never the real function.
  bool (*in_front)(const void* address) noexcept;
};

// What the engine answers.
struct EngineLink {
  unsigned version;  // kEngineLinkVersion
  // The decision of libcmt.so's dlsym hook for a name it hooks (hooks/dlsym_hook.cpp): 1 with
  // *answer set when cmt answers the lookup, 0 to hand it to the C library.
  int (*dlsym_decide)(void* handle, const char* name, void** answer) noexcept;
};

}  // namespace cmt

// Exported by libcmt-engine.so (hooks/engine_attach.cpp). Called once, right after dlopen; also
// hands the host leg's table to libcmt-host.so where that library is loaded. Returns null for a
// FrontLink of another version.
extern "C" const cmt::EngineLink* cmt_engine_attach(const cmt::FrontLink* front) noexcept;
