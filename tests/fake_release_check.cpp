// The fake driver's watch over registrations (CMT_FAKE_CUDA="check_releases=1"): the fake cannot
// show a stale page (its DMAs read through the program's addresses, so they always see the
// current pages), so instead it checks the rule that keeps real pages from going stale: no
// system call ever gives back or replaces a page while a registration holds it. A seccomp filter
// stops every munmap, mremap, madvise, brk and mmap with MAP_FIXED, from any caller and any thread
// started after it (glibc's own calls inside free() and malloc_trim() included, which no preloaded
// hook sees; cmt's copy threads included, whose signals are blocked, hence a listener and not a
// signal), and hands it to a supervising thread that works out the pages the call would release
// (madvise's dropping advice, brk downwards), counts the call as a violation if a registration
// overlaps them, and lets it continue. At exit it prints
//   fake cuda: N page releases checked, V of registered pages
// on stderr. A forked child's calls go to the same supervisor.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>

#include "fake_driver.h"

namespace cmt::fake {

namespace {

std::atomic<long> g_checked{0}, g_violations{0};
std::atomic<int> g_listener{-1};

// The pages a stopped call would give back or replace; false: none.
bool released_pages(long nr, const __u64* arg, std::uintptr_t* lo, std::uintptr_t* hi) {
  *lo = static_cast<std::uintptr_t>(arg[0]);
  *hi = *lo + static_cast<std::uintptr_t>(arg[1]);
  switch (nr) {
    case SYS_munmap:
    case SYS_mremap:
      return true;
    case SYS_mmap:
      return (arg[3] & MAP_FIXED) != 0;
    case SYS_madvise:
      switch (static_cast<int>(arg[2])) {
        case MADV_NORMAL:
        case MADV_RANDOM:
        case MADV_SEQUENTIAL:
        case MADV_WILLNEED:
        case MADV_DONTDUMP:
        case MADV_DODUMP:
        case MADV_DOFORK:
        case MADV_DONTFORK:
        case MADV_NOHUGEPAGE:
        case MADV_HUGEPAGE:
          return false;
        default:
          return true;
      }
    case SYS_brk: {
      const auto now = static_cast<std::uintptr_t>(syscall(SYS_brk, 0));  // unfiltered here
      *hi = now;
      return *lo != 0 && *lo < now;
    }
    default:
      return false;
  }
}

// The supervisor: made before the filter, so its own calls are never stopped.
void supervise() {
  int fd;
  while ((fd = g_listener.load()) < 0) usleep(100);
  for (;;) {
    seccomp_notif req;
    std::memset(&req, 0, sizeof req);
    if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
      if (errno == EINTR || errno == ENOENT) continue;
      return;
    }
    std::uintptr_t lo = 0, hi = 0;
    if (released_pages(req.data.nr, req.data.args, &lo, &hi)) {
      g_checked.fetch_add(1, std::memory_order_relaxed);
      if (registered_overlap(lo, hi) && g_violations.fetch_add(1) == 0) {
        static const char msg[] = "fake cuda: a system call released registered pages (the first)\n";
        (void)!write(2, msg, sizeof msg - 1);
      }
    }
    seccomp_notif_resp resp;
    std::memset(&resp, 0, sizeof resp);
    resp.id = req.id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  }
}

void report_at_exit() {
  char line[160];
  const int n = std::snprintf(line, sizeof line,
                              "fake cuda: %ld page releases checked, %ld of registered pages\n",
                              g_checked.load(), g_violations.load());
  (void)!write(2, line, static_cast<std::size_t>(n));
}

}  // namespace

bool install_release_check() {
  std::thread(supervise).detach();
  constexpr std::uint32_t kNr = offsetof(seccomp_data, nr);
  constexpr std::uint32_t kFlags = offsetof(seccomp_data, args) + 3 * sizeof(std::uint64_t);
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNr),
      // Jump offsets count the instructions skipped: to the USER_NOTIF return (index 9) for all
      // but mmap, which goes on to its flags (index 7).
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_munmap, 7, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mremap, 6, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_madvise, 5, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_brk, 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      // mmap: only over existing pages (MAP_FIXED, in the low word of its flags).
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kFlags),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_FIXED, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  const long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                          &prog);
  if (fd < 0) return false;
  g_listener.store(static_cast<int>(fd));
  std::atexit(report_at_exit);
  return true;
}

}  // namespace cmt::fake
