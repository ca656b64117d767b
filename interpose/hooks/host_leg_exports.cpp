// libcmt-engine.so's side of hooks/host_leg_abi.h: the table handed to libcmt-host.so, each entry
// a thin call into the host leg (interposer/host_leg.h), which decides.
#include "hooks/host_leg_abi.h"

#include "interposer/signal_chain.h"
#include "interposer/host_leg.h"

namespace cmt::hooks {
namespace {

std::size_t copy(void* dst, const void* src, std::size_t bytes, CallerHold* hold) noexcept {
  return host_leg().take_copy(dst, src, bytes, hold);
}

std::size_t fill(void* dst, int value, std::size_t bytes, CallerHold* hold) noexcept {
  return host_leg().take_fill(dst, value, bytes, hold);
}

HostRead read(int fd, void* dst, std::size_t bytes, long long offset, CallerHold* hold) noexcept {
  const HostLeg::ReadTaken r = host_leg().take_read(fd, dst, bytes, offset, hold);
  return {r.taken, r.result, r.error};
}

HostRead readv(int fd, const struct iovec* segments, int count, long long offset,
               CallerHold* hold) noexcept {
  const HostLeg::ReadTaken r = host_leg().take_readv(fd, segments, count, offset, hold);
  return {r.taken, r.result, r.error};
}

void hooks_loaded(SigactionFn next_sigaction) noexcept {
  set_next_sigaction(next_sigaction);
  host_leg().note_hooks_loaded();
}

int sigaction_for_program(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return program_sigaction(sig, act, old);
}

}  // namespace
}  // namespace cmt::hooks

const cmt::HostLegAbi* cmt::cmt_host_leg_abi() noexcept {
  // Its entries point at constant-initialized state: valid before the engine's constructors run.
  static const cmt::HostLegAbi abi{cmt::kHostLegAbiVersion,
                                   &cmt::host_leg().copy_gate(),
                                   &cmt::host_leg().fill_threshold(),
                                   cmt::hooks::copy,
                                   cmt::hooks::fill,
                                   &cmt::host_leg().read_threshold(),
                                   cmt::hooks::read,
                                   cmt::hooks::readv,
                                   cmt::hooks::hooks_loaded,
                                   cmt::hooks::sigaction_for_program};
  return &abi;
}
