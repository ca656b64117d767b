// The fault guard, the host copier under faults, and cmt's SIGSEGV/SIGBUS handler in front of the
// program's (interposer/signal_chain.h), called directly. ctest runs each test in a process of
// its own; the sanitizer builds run them all in one (whose sanitizer has a SIGSEGV handler of its
// own), so each test puts back the dispositions it changed.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cmt_fault_handler.h"
#include "common/caller_hold.h"
#include "config/options.h"
#include "engine/host/host_copier.h"
#include "engine/shared/fault_guard.h"
#include "hooks/hook_hold.h"
#include "interposer/signal_chain.h"

namespace cmt {
namespace {

constexpr std::size_t kPage = 4096;

// `bytes` of memory whose page at `bad` is protected with `prot`.
struct Guarded {
  Guarded(std::size_t bytes, std::size_t bad, int prot) : n(bytes) {
    void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p = static_cast<char*>(m);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<char>(i * 31 + 7);
    mprotect(p + bad, kPage, prot);
  }
  ~Guarded() { munmap(p, n); }
  char* p;
  std::size_t n;
};

void read_page(void* arg) {
  volatile char* p = static_cast<volatile char*>(arg);
  (void)p[0];
}

TEST(FaultGuard, AFaultInsideReturnsFalseAndTheThreadGoesOn) {
  install_cmt_handler();
  Guarded g(4 * kPage, kPage, PROT_NONE);
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(run_fault_guarded(read_page, g.p + kPage));
    EXPECT_FALSE(inside_fault_guard());
  }
  EXPECT_TRUE(run_fault_guarded(read_page, g.p));
}

Config copier_config() {
  Config c;
  c.fresh_pages = FreshPages::Off;
  return c;
}

TEST(HostCopier, AFaultLeavesTheFrontDoneAndTheRestToTheCaller) {
  install_cmt_handler();
  HostCopier copier(copier_config(), 3, {});
  const std::size_t n = 16u << 20, bad = (10u << 20) + 100 * kPage;
  Guarded src(n, bad, PROT_NONE);
  std::vector<char> dst(n);
  for (int round = 0; round < 20; ++round) {
    const std::size_t done = copier.copy(dst.data(), src.p, n);
    ASSERT_LE(done, bad);
    EXPECT_EQ(std::memcmp(dst.data(), src.p, done), 0);
  }
  EXPECT_EQ(copier.counts().faults, 20u);
  // A read-only page in a fill's way: the same.
  Guarded ro(n, bad, PROT_READ);
  const std::size_t done = copier.fill(ro.p, 0x11, n);
  EXPECT_LE(done, bad);
  EXPECT_EQ(copier.counts().fill_faults, 1u);
  for (std::size_t i = 0; i < done; ++i) ASSERT_EQ(ro.p[i], 0x11);
  // And a clean copy after all that: whole.
  mprotect(src.p + bad, kPage, PROT_READ | PROT_WRITE);
  EXPECT_EQ(copier.copy(dst.data(), src.p, n), n);
  EXPECT_EQ(std::memcmp(dst.data(), src.p, n), 0);
}

sigjmp_buf g_back;
void* g_fault_address = nullptr;
bool g_usr1_blocked_inside = false;

void program_handler(int, siginfo_t* info, void*) {
  g_fault_address = info->si_addr;
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  g_usr1_blocked_inside = sigismember(&now, SIGUSR1) == 1;
  siglongjmp(g_back, 1);
}

TEST(SignalChain, TheProgramSeesAndGetsItsOwnHandler) {
  install_cmt_handler();
  struct sigaction mine {};
  mine.sa_sigaction = program_handler;
  mine.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&mine.sa_mask);
  sigaddset(&mine.sa_mask, SIGUSR1);
  struct sigaction before {}, old {};
  ASSERT_EQ(program_sigaction(SIGSEGV, nullptr, &before), 0);
  ASSERT_EQ(program_sigaction(SIGSEGV, &mine, &old), 0);
  EXPECT_EQ(old.sa_handler, before.sa_handler);  // what the process had: its own, not cmt's
  struct sigaction seen {};
  ASSERT_EQ(program_sigaction(SIGSEGV, nullptr, &seen), 0);
  EXPECT_EQ(seen.sa_sigaction, program_handler);
  EXPECT_TRUE(fault_handlers_in_front());  // cmt's stays installed

  // A fault of the thread's own, outside any guard: the program's handler, with its mask, at the
  // faulting address; SA_RESETHAND leaves the default behind it.
  Guarded g(2 * kPage, kPage, PROT_NONE);
  if (sigsetjmp(g_back, 1) == 0) {
    read_page(g.p + kPage);
    FAIL() << "no fault";
  }
  EXPECT_EQ(g_fault_address, g.p + kPage);
  EXPECT_TRUE(g_usr1_blocked_inside);
  ASSERT_EQ(program_sigaction(SIGSEGV, nullptr, &seen), 0);
  EXPECT_EQ(seen.sa_handler, SIG_DFL);
  program_sigaction(SIGSEGV, &before, nullptr);
}

TEST(SignalChain, ASentSignalTheProgramIgnoresIsDropped) {
  install_cmt_handler();
  struct sigaction ignore {}, before {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(program_sigaction(SIGBUS, &ignore, &before), 0);
  raise(SIGBUS);  // would end the process were it not ignored
  program_sigaction(SIGBUS, &before, nullptr);
}

SigactionFn libc_sigaction() {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  return reinterpret_cast<SigactionFn>(dlsym(libc, "sigaction"));
}

TEST(SignalChain, IgnoredAndDefaultAreInstalledAsTheyAre) {
  install_cmt_handler();
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(program_sigaction(SIGUSR2, &ignore, &old), 0);
  struct sigaction now {};
  libc_sigaction()(SIGUSR2, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
  program_sigaction(SIGUSR2, &old, nullptr);
}

std::atomic<int> g_usr1{0};
std::atomic<int> g_usr1_value{-1};
void count_usr1(int, siginfo_t* info, void*) {
  g_usr1.fetch_add(1);
  g_usr1_value.store(info->si_code == SI_QUEUE ? info->si_value.sival_int : -2);
}

// A signal the program handles, arriving while the thread is held: put aside, then sent again to
// the thread with its own siginfo when the hold is released; the program sees its own handler.
TEST(SignalChain, ASignalDuringAHoldRunsItsHandlerAtTheRelease) {
  g_usr1.store(0);  // counted afresh when the test runs again in one process
  g_usr1_value.store(-1);
  install_cmt_handler();
  struct sigaction mine {}, old {}, seen {}, real {};
  mine.sa_sigaction = count_usr1;
  mine.sa_flags = SA_SIGINFO;
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(program_sigaction(SIGUSR1, &mine, &old), 0);
  ASSERT_EQ(program_sigaction(SIGUSR1, nullptr, &seen), 0);
  EXPECT_EQ(seen.sa_sigaction, count_usr1);
  libc_sigaction()(SIGUSR1, nullptr, &real);
  EXPECT_NE(real.sa_sigaction, count_usr1);  // cmt's in front

  CallerHold hold;
  hold.hold();
  begin_deferring(&hold);
  sigval v{};
  v.sival_int = 41;
  ASSERT_EQ(pthread_sigqueue(pthread_self(), SIGUSR1, v), 0);
  EXPECT_EQ(g_usr1.load(), 0);  // held: not yet
  EXPECT_EQ(hold.deferred, 1);
  end_deferring();
  hold.release();
  EXPECT_EQ(g_usr1.load(), 1);
  EXPECT_EQ(g_usr1_value.load(), 41);  // its own code and value
  // Not held: at once.
  ASSERT_EQ(pthread_sigqueue(pthread_self(), SIGUSR1, v), 0);
  EXPECT_EQ(g_usr1.load(), 2);
  program_sigaction(SIGUSR1, &old, nullptr);
}

// A hold left by a jump (a handler's siglongjmp from a fault of the caller's own, which is never
// put aside): a signal that comes later must not be put aside into the popped frame, where no
// release will ever send it, and whose memory is another frame's by then.
sigjmp_buf g_out;
__attribute__((noinline)) void deferring_then_jumping() {
  CallerHold hold;
  hold.hold();
  begin_deferring(&hold);
  siglongjmp(g_out, 1);  // as a handler leaving the held call would
}

TEST(SignalChain, AHoldAbandonedByAJumpPutsNothingAside) {
  g_usr1.store(0);
  install_cmt_handler();
  struct sigaction mine {
  }, old{};
  mine.sa_sigaction = count_usr1;
  mine.sa_flags = SA_SIGINFO;
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(program_sigaction(SIGUSR1, &mine, &old), 0);
  int state = PTHREAD_CANCEL_ENABLE;
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &state);
  if (sigsetjmp(g_out, 1) == 0) deferring_then_jumping();
  pthread_setcancelstate(state, nullptr);
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, nullptr);
  sigval v{};
  v.sival_int = 7;
  ASSERT_EQ(pthread_sigqueue(pthread_self(), SIGUSR1, v), 0);
  EXPECT_EQ(g_usr1.load(), 1) << "the handler ran at once";
  EXPECT_EQ(g_usr1_value.load(), 7);
  ASSERT_EQ(pthread_sigqueue(pthread_self(), SIGUSR1, v), 0);
  EXPECT_EQ(g_usr1.load(), 2);
  end_deferring();
  program_sigaction(SIGUSR1, &old, nullptr);
}

int cancel_state_now() {
  int state = 0;
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &state);
  pthread_setcancelstate(state, nullptr);
  return state;
}

// The hold of a hooked CUDA call (hooks/hook_hold.h): each hook holds the thread and gives the
// state it found back; the offer's signals go into the hold of the hook running.
// Where the inner hook's hold was (its address only: the hold is gone once it returns).
__attribute__((noinline)) std::uintptr_t inner_hook(int* state_inside) {
  HookHold inner;
  const auto seen = reinterpret_cast<std::uintptr_t>(HookHold::current());
  *state_inside = cancel_state_now();
  inner.leave();
  return seen;
}

__attribute__((noinline)) void hook_then_jumping() {
  HookHold hold;
  siglongjmp(g_out, 1);  // as a handler leaving the CUDA call inside the hook would
}

TEST(HookHold, EachHookHoldsAndGivesBackWhatItFound) {
  ASSERT_EQ(cancel_state_now(), PTHREAD_CANCEL_ENABLE);
  int inside = -1;
  {
    HookHold outer;
    const auto mine = reinterpret_cast<std::uintptr_t>(HookHold::current());
    EXPECT_EQ(cancel_state_now(), PTHREAD_CANCEL_DISABLE);
    const std::uintptr_t nested = inner_hook(&inside);  // a handler's hook inside this one
    EXPECT_NE(nested, mine);
    EXPECT_EQ(inside, PTHREAD_CANCEL_DISABLE);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(HookHold::current()), mine)
        << "this hook's hold again once the inner one left";
    EXPECT_EQ(cancel_state_now(), PTHREAD_CANCEL_DISABLE)
        << "the inner one gave back what it found";
    outer.leave();
  }
  EXPECT_EQ(cancel_state_now(), PTHREAD_CANCEL_ENABLE);
  int type = -1;
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &type);
  EXPECT_EQ(type, PTHREAD_CANCEL_DEFERRED);

  // A jump out of a hook abandons its hold: cancellation stays disabled (the README's limit), and
  // the next hook holds and gives back what it finds.
  if (sigsetjmp(g_out, 1) == 0) hook_then_jumping();
  EXPECT_EQ(cancel_state_now(), PTHREAD_CANCEL_DISABLE);
  EXPECT_NE(inner_hook(&inside), 0u);
  EXPECT_EQ(cancel_state_now(), PTHREAD_CANCEL_DISABLE);
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);  // as the test found it
}

}  // namespace
}  // namespace cmt
