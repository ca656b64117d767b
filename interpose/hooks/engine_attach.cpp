// libcmt-engine.so's side of hooks/engine_link.h: what it learns from libcmt.so when loaded, the
// decision of libcmt.so's dlsym hook, and the host leg's table handed to libcmt-host.so.
#include <dlfcn.h>

#include "common/thread_context.h"
#include "cuda/real_dl.h"
#include "hooks/driver_hooks.h"
#include "hooks/engine_link.h"
#include "hooks/host_leg_abi.h"

namespace cmt {

// dlsym(handle, name) for a name cmt hooks, asked by libcmt.so's dlsym (handle is never
// RTLD_NEXT: only the real dlsym knows its caller). Answers cmt's hook in place of the exact
// libcuda variant it mirrors, and "not found" where a global lookup would find only cmt's own
// export, as it would without cmt.
int decide_dlsym(void* handle, const char* name, void** answer) noexcept {
  if (t_thread.deciding_dlsym) return 0;  // a lookup made from inside goes straight through
  const bool driver = is_hooked_driver_symbol(name);
  if (!driver && !is_hooked_runtime_symbol(name)) return 0;
  t_thread.deciding_dlsym = true;
  void* found = real_dlsym(handle, name);
  void* hook = nullptr;
  bool answered = false;
  if (found && is_libcmt_address(found)) {
    // A global lookup found cmt's own export. Without cmt it would have found the next
    // definition, or none: a program probing for CUDA must still see "none" (and dlerror()
    // then names the symbol, from this failed lookup).
    if (!next_symbol(name)) answered = true;
  } else if (found && driver) {
    hook = driver_hook_for_symbol(name, found);
    answered = hook != found;
  }
  t_thread.deciding_dlsym = false;
  if (!answered) return 0;
  *answer = hook;
  return 1;
}

namespace {

// libcmt-host.so's entry (hooks/host_leg_abi.h), where that library is preloaded.
void hand_host_leg_to_hooks() {
  using AttachFn = void (*)(const HostLegAbi*) noexcept;
  auto attach = reinterpret_cast<AttachFn>(real_dlsym(RTLD_DEFAULT, kHostLibraryAttachSymbol));
  if (attach) attach(cmt_host_leg_abi());
}

int dlsym_decide(void* handle, const char* name, void** answer) noexcept {
  return decide_dlsym(handle, name, answer);
}

}  // namespace
}  // namespace cmt

extern "C" __attribute__((visibility("default"))) const cmt::EngineLink* cmt_engine_attach(
    const cmt::FrontLink* front) noexcept {
  static const cmt::EngineLink link{cmt::kEngineLinkVersion, cmt::dlsym_decide};
  if (!front || front->version != cmt::kEngineLinkVersion) return nullptr;
  cmt::set_next_symbol_finder(front->next_symbol);
  cmt::set_front_address_test(front->in_front);
  cmt::hand_host_leg_to_hooks();
  return &link;
}
