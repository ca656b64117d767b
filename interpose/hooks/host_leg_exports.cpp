// libcmt.so's side of hooks/host_leg_abi.h: the table libcmt-host.so fetches, each entry a thin
// call into the host leg (interposer/host_leg.h), which decides.
#include "hooks/host_leg_abi.h"

#include "interposer/host_leg.h"

namespace cmt::hooks {
namespace {

int copy(void* dst, const void* src, std::size_t bytes) noexcept {
  return host_leg().take_copy(dst, src, bytes) ? 1 : 0;
}

int fill(void* dst, int value, std::size_t bytes) noexcept {
  return host_leg().take_fill(dst, value, bytes) ? 1 : 0;
}

void hooks_loaded() noexcept {
  host_leg().note_hooks_loaded();
}

}  // namespace
}  // namespace cmt::hooks

extern "C" __attribute__((visibility("default"))) const cmt::HostLegAbi*
cmt_host_leg_abi() noexcept {
  // Its entries point at constant-initialized state: valid before libcmt.so's constructors run.
  static const cmt::HostLegAbi abi{cmt::kHostLegAbiVersion,
                                   &cmt::host_leg().copy_threshold(),
                                   &cmt::host_leg().fill_threshold(),
                                   cmt::hooks::copy,
                                   cmt::hooks::fill,
                                   cmt::hooks::hooks_loaded};
  return &abi;
}
