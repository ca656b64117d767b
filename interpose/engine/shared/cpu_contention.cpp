#include "engine/shared/cpu_contention.h"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <cerrno>
#include <new>

namespace cmt {

CpuContention::CpuContention(const std::string& path, unsigned cpus)
    : path_(path), cpus_(cpus ? cpus : static_cast<unsigned>(get_nprocs() > 0 ? get_nprocs() : 1)) {
  char first = 0;
  readable_ = file_.pread_at(&first, 1, 0) == 1;
}

CpuContention::~CpuContention() {
  file_.reopen();  // closes the descriptor if it is still this one's
}

namespace {
std::atomic<CpuContention*> g_stand_in{nullptr};
}  // namespace

CpuContention& CpuContention::machine() {
  if (CpuContention* stand_in = g_stand_in.load(std::memory_order_acquire)) return *stand_in;
  // In static storage, never destroyed, and made without the heap: nothing here may throw into
  // the program (the path fits in std::string's own buffer).
  alignas(CpuContention) static unsigned char storage[sizeof(CpuContention)];
  static CpuContention* const instance = new (storage) CpuContention();
  return *instance;
}

void CpuContention::set_machine(CpuContention* stand_in) {
  g_stand_in.store(stand_in, std::memory_order_release);
}

bool CpuContention::parse_runnable(const char* text, std::size_t length, unsigned* runnable) {
  // Three load averages, then RUNNABLE/THREADS: the number after the third space.
  std::size_t at = 0;
  for (int spaces = 0; spaces < 3; ++at) {
    if (at >= length) return false;
    if (text[at] == ' ') ++spaces;
  }
  unsigned long n = 0;
  std::size_t digits = 0;
  for (; at < length && text[at] >= '0' && text[at] <= '9' && digits < 9; ++at, ++digits)
    n = n * 10 + static_cast<unsigned long>(text[at] - '0');
  if (digits == 0 || at >= length || text[at] != '/') return false;
  *runnable = static_cast<unsigned>(n);
  return true;
}

bool CpuContention::read_now() {
  char text[128];
  ssize_t n;
  do {
    n = file_.pread_at(text, sizeof(text), 0);
  } while (n < 0 && errno == EINTR);
  unsigned runnable = 0;
  if (n <= 0 || !parse_runnable(text, static_cast<std::size_t>(n), &runnable)) return false;
  reads_.fetch_add(1, std::memory_order_relaxed);
  const bool taken = runnable > cpus_;
  if (taken) contended_reads_.fetch_add(1, std::memory_order_relaxed);
  return taken;
}

bool CpuContention::contended(std::int64_t now_ns) {
  if (!readable_) return false;
  std::int64_t stale_at = stale_at_ns_.load(std::memory_order_relaxed);
  // One thread reads; the others keep the answer held until it is replaced.
  if (now_ns >= stale_at && stale_at_ns_.compare_exchange_strong(stale_at, now_ns + kRefreshNs,
                                                                 std::memory_order_relaxed)) {
    const int saved = errno;  // a copy thread's errno is its own, but keep it as found
    contended_.store(read_now(), std::memory_order_relaxed);
    errno = saved;
  }
  return contended_.load(std::memory_order_relaxed);
}

}  // namespace cmt
