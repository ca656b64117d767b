// Faults, signals and cancellation inside large memcpy and memset calls, for host_faults.sh: each
// scenario behaves as it does with libc alone, whether or not cmt's copy threads take the call
// (issue 31, findings 1 and 2). Run once per scenario, with and without the preload.
//
//   guard-src, guard-dst, truncated-src: memcpy reading a PROT_NONE page, writing a read-only page,
//       reading a file mapping past its file's end (SIGBUS); fill-readonly, fill-truncated: memset
//       writing a read-only page, a shared file mapping past its end. The program's SA_SIGINFO
//       handler must run on the calling thread with an address inside the range and in the bad
//       page, and siglongjmp out; ten rounds, then the page is mended and a copy is checked.
//   mend: the handler makes the page readable and returns; the copy completes, byte-exact.
//   signal-api: the handler installed with signal() (no siginfo), left by siglongjmp.
//   no-handler: no handler; the process must die of SIGSEGV.
//   alarm-longjmp: a one-shot timer, 20 us to 3 ms ahead, whose handler siglongjmps out of a loop
//       of 32 MiB copies, 300 times; right after each jump the destination is written with a
//       marker, which must stay (no copy thread may still be writing it), and the handler must
//       run on the copying thread (the kernel's pick for a process-directed signal, as without
//       cmt); then the timer stops and copies are checked.
//   sigqueue: another thread queues 200 real-time signals, each with its own value, at the
//       copying thread while it copies 32 MiB again and again; each must arrive once, on that
//       thread, with its code (SI_QUEUE) and value.
//   cancel: threads copying 32 MiB in a loop, asynchronously cancellable, are cancelled, 150
//       rounds of four at different moments (the process must not end: an unwind through
//       libcmt.so's frames ends it); then the main thread's copies are checked.
//   query: sigaction(SIGSEGV, NULL, &old) returns the program's own handler.
//   cancel-read: a thread with a cancellation pending (deferred) calls read, pread, readv,
//       preadv or fread of 2 MiB into pinned memory: cancelled there, before it reads (the
//       descriptor's offset unmoved; the stream's buffered bytes taken, as glibc's fread takes
//       them before its first read, and its lock given back); an fread of a stream opened with
//       "c" is no cancellation point and reads.
//   cancel-copy: a thread with a cancellation pending (deferred) copies 32 MiB + 3 of pageable
//       memory to the GPU and back (cuMemcpyHtoD, cuMemcpyDtoH), then reaches pthread_testcancel,
//       20 times; then threads copying so in a loop are cancelled from outside at different
//       moments, 40 rounds of two. The process must not end (under cmt, a cancellation acting
//       at a wait inside libcmt-engine.so's noexcept frames ended it); every thread must end
//       cancelled, inside a copy call or after it; a round trip that returned must be exact.
//       Says how many pending cancellations acted inside a copy call (CUDA's choice; under
//       cmt none: a hooked call is never a cancellation point).
//
// Linked against the fake libcuda, or the real one for the GPU machine: cuInit and cuMemAllocHost
// reach libcmt.so, which arms the host leg. Prints "ok SCENARIO ..." and exits 0 when it behaves
// as libc's; 77 without a GPU.
#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kBytes = 16u << 20;
constexpr std::size_t kBadAt = 10u << 20;  // the bad page, in the middle of a unit past the first

sigjmp_buf g_jump;
std::atomic<int> g_handled{0}, g_wrong_thread{0}, g_wrong_address{0};
pid_t g_caller = 0;
char* g_lo = nullptr;  // the range asked for
char* g_hi = nullptr;
char* g_bad = nullptr;  // the bad page's first byte
std::size_t g_bad_len = kPage;

pid_t tid() {
  return static_cast<pid_t>(syscall(SYS_gettid));
}

void check_fault(void* addr) {
  g_handled.fetch_add(1);
  if (tid() != g_caller) g_wrong_thread.fetch_add(1);
  char* a = static_cast<char*>(addr);
  if (a < g_lo || a >= g_hi || a < g_bad || a >= g_bad + g_bad_len) g_wrong_address.fetch_add(1);
}

void on_fault_jump(int, siginfo_t* info, void*) {
  check_fault(info->si_addr);
  siglongjmp(g_jump, 1);
}

void on_fault_mend(int, siginfo_t* info, void*) {
  check_fault(info->si_addr);
  mprotect(g_bad, g_bad_len, PROT_READ | PROT_WRITE);
}

void on_fault_plain(int) {
  g_handled.fetch_add(1);
  if (tid() != g_caller) g_wrong_thread.fetch_add(1);
  siglongjmp(g_jump, 1);
}

void install(int sig, void (*fn)(int, siginfo_t*, void*)) {
  struct sigaction sa {};
  sa.sa_sigaction = fn;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
}

char* map_anon(std::size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::exit(3);
  std::memset(p, 0x5a, n);  // written: not fresh pages
  return static_cast<char*>(p);
}

// A shared mapping of a file of kBytes, whose file is then cut to kBadAt: past it, SIGBUS.
char* map_truncated(int fill_byte) {
  char name[] = "/tmp/cmt-faults-XXXXXX";
  int fd = mkstemp(name);
  if (fd < 0) std::exit(3);
  unlink(name);
  if (ftruncate(fd, kBytes) != 0) std::exit(3);
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) std::exit(3);
  std::memset(p, fill_byte, kBytes);
  if (ftruncate(fd, kBadAt) != 0) std::exit(3);
  close(fd);
  g_bad_len = kBytes - kBadAt;
  return static_cast<char*>(p);
}

int report(const char* name, int rounds) {
  const bool ok = g_handled.load() == rounds && g_wrong_thread.load() == 0 &&
                  g_wrong_address.load() == 0;
  std::printf("%s %s handled %d of %d, on another thread %d, outside the range %d\n",
              ok ? "ok" : "FAIL", name, g_handled.load(), rounds, g_wrong_thread.load(),
              g_wrong_address.load());
  return ok ? 0 : 1;
}

// Ten faulting calls left by siglongjmp, then one after the page is mended: byte-exact.
int faulting_rounds(const std::string& name, char* dst, char* src, bool fill) {
  install(SIGSEGV, on_fault_jump);
  install(SIGBUS, on_fault_jump);
  g_lo = fill ? dst : (name == "guard-dst" ? dst : src);
  g_hi = g_lo + kBytes;
  constexpr int kRounds = 10;
  for (int i = 0; i < kRounds; ++i)
    if (sigsetjmp(g_jump, 1) == 0) {
      if (fill)
        std::memset(dst, i, kBytes);
      else
        std::memcpy(dst, src, kBytes);
      std::printf("FAIL %s: the call returned without a fault\n", name.c_str());
      return 1;
    }
  if (report(name.c_str(), kRounds) != 0) return 1;
  if (name.find("truncated") != std::string::npos) return 0;  // the file's end stays
  mprotect(g_bad, kPage, PROT_READ | PROT_WRITE);
  std::vector<char> expect(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) src[i] = static_cast<char>(i * 7 + 3);
  std::memcpy(dst, src, kBytes);
  if (std::memcmp(dst, src, kBytes) != 0) {
    std::printf("FAIL %s: the copy after mending differs\n", name.c_str());
    return 1;
  }
  return 0;
}

int fault_scenario(const std::string& name) {
  char* src = map_anon(kBytes);
  char* dst = map_anon(kBytes);
  if (name == "guard-src") {
    g_bad = src + kBadAt;
    mprotect(g_bad, kPage, PROT_NONE);
    return faulting_rounds(name, dst, src, false);
  }
  if (name == "guard-dst") {
    g_bad = dst + kBadAt;
    mprotect(g_bad, kPage, PROT_READ);
    return faulting_rounds(name, dst, src, false);
  }
  if (name == "fill-readonly") {
    g_bad = dst + kBadAt;
    mprotect(g_bad, kPage, PROT_READ);
    return faulting_rounds(name, dst, src, true);
  }
  if (name == "truncated-src") {
    src = map_truncated(0x33);
    g_bad = src + kBadAt;
    return faulting_rounds(name, dst, src, false);
  }
  dst = map_truncated(0x44);  // fill-truncated
  g_bad = dst + kBadAt;
  return faulting_rounds(name, dst, src, true);
}

int mend() {
  char* src = map_anon(kBytes);
  char* dst = map_anon(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) src[i] = static_cast<char>(i * 13 + 1);
  g_bad = src + kBadAt;
  g_lo = src;
  g_hi = src + kBytes;
  mprotect(g_bad, kPage, PROT_NONE);
  install(SIGSEGV, on_fault_mend);
  std::memcpy(dst, src, kBytes);
  if (std::memcmp(dst, src, kBytes) != 0) {
    std::printf("FAIL mend: the copy differs\n");
    return 1;
  }
  return report("mend", 1);
}

int signal_api() {
  char* src = map_anon(kBytes);
  char* dst = map_anon(kBytes);
  mprotect(src + kBadAt, kPage, PROT_NONE);
  signal(SIGSEGV, on_fault_plain);
  for (int i = 0; i < 5; ++i)
    if (sigsetjmp(g_jump, 1) == 0) {
      std::memcpy(dst, src, kBytes);
      std::printf("FAIL signal-api: no fault\n");
      return 1;
    }
  const bool ok = g_handled.load() == 5 && g_wrong_thread.load() == 0;
  std::printf("%s signal-api handled %d of 5, on another thread %d\n", ok ? "ok" : "FAIL",
              g_handled.load(), g_wrong_thread.load());
  return ok ? 0 : 1;
}

int no_handler() {
  char* src = map_anon(kBytes);
  char* dst = map_anon(kBytes);
  mprotect(src + kBadAt, kPage, PROT_NONE);
  std::memcpy(dst, src, kBytes);
  std::printf("FAIL no-handler: survived\n");
  return 1;
}

constexpr std::size_t kBig = 32u << 20;
constexpr unsigned char kMarker = 0xee;
sigjmp_buf g_alarm_jump;
std::atomic<int> g_alarms{0};

std::atomic<int> g_alarms_elsewhere{0};

void on_alarm(int) {
  g_alarms.fetch_add(1);
  if (tid() != g_caller) g_alarms_elsewhere.fetch_add(1);
  siglongjmp(g_alarm_jump, 1);
}

// The pages copied to must be the last writes: a copy thread still at work would change them.
bool marker_stays(const char* dst) {
  usleep(2000);
  for (std::size_t i = 0; i < kBig; i += 997)
    if (static_cast<unsigned char>(dst[i]) != kMarker) return false;
  return true;
}

// Copies checked after the interruptions: every byte, with fresh content each time.
bool copies_check(char* dst, char* src, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < kBig; i += 4096) src[i] = static_cast<char>(r + i / 4096);
    std::memcpy(dst, src, kBig);
    if (std::memcmp(dst, src, kBig) != 0) return false;
  }
  return true;
}

int alarm_longjmp() {
  char* src = map_anon(kBig);
  char* dst = map_anon(kBig);
  signal(SIGALRM, on_alarm);
  int jumps = 0, overwritten = 0;
  for (int i = 0; i < 300; ++i) {
    // One shot, 20 us to 3 ms ahead: it lands anywhere in a copy (one takes about 3 ms).
    itimerval once{{0, 0}, {0, 20 + (i * 7919) % 3000}};
    if (sigsetjmp(g_alarm_jump, 1) == 0) {
      setitimer(ITIMER_REAL, &once, nullptr);
      for (;;) std::memcpy(dst, src, kBig);
    }
    ++jumps;
    std::memset(dst, kMarker, kBig);
    if (!marker_stays(dst)) ++overwritten;
  }
  const bool after = copies_check(dst, src, 20);
  const bool ok = overwritten == 0 && after && g_alarms_elsewhere.load() == 0;
  std::printf("%s alarm-longjmp jumps %d, destination written after the jump %d, handled on "
              "another thread %d, copies after %s\n",
              ok ? "ok" : "FAIL", jumps, overwritten, g_alarms_elsewhere.load(),
              after ? "exact" : "DIFFER");
  return ok ? 0 : 1;
}

// sigqueue: values arrive in order, each once, with their code, on the copying thread.
std::atomic<int> g_queued_seen{0}, g_queued_wrong{0};

void on_queued(int, siginfo_t* info, void*) {
  const int expect = g_queued_seen.load();
  if (info->si_code != SI_QUEUE || info->si_value.sival_int != expect || tid() != g_caller)
    g_queued_wrong.fetch_add(1);
  g_queued_seen.fetch_add(1);
}

int sigqueue_scenario() {
  constexpr int kSignals = 200;
  const int sig = SIGRTMIN + 1;
  install(sig, on_queued);
  char* src = map_anon(kBig);
  char* dst = map_anon(kBig);
  std::atomic<bool> done{false};
  const pthread_t copier = pthread_self();
  std::thread sender([&] {
    for (int i = 0; i < kSignals; ++i) {
      sigval v{};
      v.sival_int = i;
      pthread_sigqueue(copier, sig, v);
      while (g_queued_seen.load() <= i) usleep(50);  // one in flight at a time
      usleep(static_cast<unsigned>(i % 7) * 100);
    }
    done.store(true);
  });
  while (!done.load()) std::memcpy(dst, src, kBig);
  sender.join();
  const bool ok = g_queued_seen.load() == kSignals && g_queued_wrong.load() == 0;
  std::printf("%s sigqueue: %d of %d arrived, %d wrong (code, value, order or thread)\n",
              ok ? "ok" : "FAIL", g_queued_seen.load(), kSignals, g_queued_wrong.load());
  return ok ? 0 : 1;
}

void* copy_forever(void* arg) {
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, nullptr);
  auto** bufs = static_cast<char**>(arg);
  for (;;) std::memcpy(bufs[0], bufs[1], kBig);
  return nullptr;
}

int cancel() {
  constexpr int kThreads = 4;
  std::vector<char*> bufs;
  for (int t = 0; t < 2 * kThreads; ++t) bufs.push_back(map_anon(kBig));
  // Many rounds, each cancelling at another moment of the copies: a cancellation whose signal
  // lands inside libcmt.so rather than in a hook or in libc is rare, one round in hundreds.
  for (int round = 0; round < 150; ++round) {
    pthread_t th[kThreads];
    for (int t = 0; t < kThreads; ++t) pthread_create(&th[t], nullptr, copy_forever, &bufs[2 * t]);
    usleep(300 + (round * 137) % 3000);
    for (int t = 0; t < kThreads; ++t) pthread_cancel(th[t]);
    for (int t = 0; t < kThreads; ++t) pthread_join(th[t], nullptr);
  }
  char* src = map_anon(kBig);
  char* dst = map_anon(kBig);
  const bool ok = copies_check(dst, src, 20);
  std::printf("%s cancel: copies after the cancellations %s\n", ok ? "ok" : "FAIL",
              ok ? "exact" : "DIFFER");
  return ok ? 0 : 1;
}

// cancel-copy: round trips through the GPU on threads that get cancelled.
CUcontext g_context = nullptr;
constexpr std::size_t kTrip = (32u << 20) + 3;

struct Trip {
  char* src;
  char* back;
  CUdeviceptr dev;
  bool pending;                  // cancelled before its first copy (else from outside)
  std::atomic<int> returned{0};  // copy calls that returned
  std::atomic<int> exact{0};     // round trips that came back byte-exact
  std::atomic<int> wrong{0};     // ... and that did not
};

void* trip_cancelled(void* arg) {
  auto* t = static_cast<Trip*>(arg);
  if (cuCtxSetCurrent(g_context) != CUDA_SUCCESS) return nullptr;
  if (t->pending) pthread_cancel(pthread_self());  // deferred: pending until a cancellation point
  for (unsigned round = 0;; ++round) {
    t->src[round % kTrip] = static_cast<char>(round);
    const bool up = cuMemcpyHtoD(t->dev, t->src, kTrip) == CUDA_SUCCESS;
    t->returned.fetch_add(1);
    const bool down = cuMemcpyDtoH(t->back, t->dev, kTrip) == CUDA_SUCCESS;
    t->returned.fetch_add(1);
    (up && down && std::memcmp(t->src, t->back, kTrip) == 0 ? t->exact : t->wrong).fetch_add(1);
    pthread_testcancel();
  }
  return nullptr;
}

int cancel_copy() {
  Trip trips[2];
  for (Trip& t : trips) {
    t.src = map_anon(kTrip);
    t.back = map_anon(kTrip);
    for (std::size_t i = 0; i < kTrip; ++i) t.src[i] = static_cast<char>(i * 31 + 7);
    if (cuMemAlloc(&t.dev, kTrip) != CUDA_SUCCESS) return 2;
  }
  int not_cancelled = 0, inside = 0, pending_rounds = 20;
  for (int round = 0; round < pending_rounds; ++round) {
    Trip& t = trips[0];
    t.pending = true;
    const int before = t.returned.load();
    pthread_t th;
    pthread_create(&th, nullptr, trip_cancelled, &t);
    void* result = nullptr;
    pthread_join(th, &result);
    not_cancelled += result != PTHREAD_CANCELED;
    inside += t.returned.load() - before < 2;  // acted inside a copy call
  }
  for (int round = 0; round < 40; ++round) {
    pthread_t th[2];
    for (int k = 0; k < 2; ++k) {
      trips[k].pending = false;
      pthread_create(&th[k], nullptr, trip_cancelled, &trips[k]);
    }
    usleep(200 + (round * 1237) % 20000);
    for (pthread_t& x : th) pthread_cancel(x);
    for (pthread_t& x : th) {
      void* result = nullptr;
      pthread_join(x, &result);
      not_cancelled += result != PTHREAD_CANCELED;
    }
  }
  const int exact = trips[0].exact.load() + trips[1].exact.load();
  const int wrong = trips[0].wrong.load() + trips[1].wrong.load();
  const bool ok = not_cancelled == 0 && wrong == 0;
  std::printf(
      "%s cancel-copy: %d threads not cancelled, %d round trips exact, %d wrong; %d of %d "
      "pending cancellations acted inside a copy call\n",
      ok ? "ok" : "FAIL", not_cancelled, exact, wrong, inside, pending_rounds);
  return ok ? 0 : 1;
}

// cancel-read: one call, on a thread of its own whose cancellation is pending when it makes it.
struct CancelRead {
  int kind;  // 0 read, 1 pread, 2 readv, 3 preadv, 4 fread, 5 fread of a "c" stream
  int fd;
  FILE* fp;
  void* pinned;
  std::atomic<bool> returned{false};
};

void* read_cancelled(void* arg) {
  auto* c = static_cast<CancelRead*>(arg);
  constexpr std::size_t n = 2u << 20;
  iovec seg{c->pinned, n};
  pthread_cancel(pthread_self());  // deferred: pending until a cancellation point
  switch (c->kind) {
    case 0:
      (void)read(c->fd, c->pinned, n);
      break;
    case 1:
      (void)pread(c->fd, c->pinned, n, 4096);
      break;
    case 2:
      (void)readv(c->fd, &seg, 1);
      break;
    case 3:
      (void)preadv(c->fd, &seg, 1, 4096);
      break;
    default:
      (void)std::fread(c->pinned, 1, n, c->fp);
  }
  c->returned = true;
  return nullptr;
}

int cancel_read(void* pinned) {
  char name[] = "/tmp/cmt-cancel-read-XXXXXX";
  const int w = mkstemp(name);
  std::vector<char> bytes(8u << 20, 'x');
  if (w < 0 || write(w, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) return 2;
  close(w);
  const char* names[] = {"read", "pread", "readv", "preadv", "fread", "fread (\"rc\")"};
  bool ok = true;
  for (int kind = 0; kind < 6; ++kind) {
    CancelRead c;
    c.kind = kind;
    c.fd = open(name, O_RDONLY);
    c.fp = std::fopen(name, kind == 5 ? "rc" : "r");
    c.pinned = pinned;
    // The streams hold bytes in their buffers: glibc's fread takes them before its first read.
    char first[100];
    if (kind >= 4 && std::fread(first, 1, sizeof first, c.fp) != sizeof first) ok = false;
    pthread_t th;
    pthread_create(&th, nullptr, read_cancelled, &c);
    void* result = nullptr;
    pthread_join(th, &result);
    const bool cancelled = result == PTHREAD_CANCELED;
    const long at = static_cast<long>(lseek(c.fd, 0, SEEK_CUR));
    // The stream must be usable (its lock given back) and where the call left it.
    char next[16] = {};
    const long stream_at = std::ftell(c.fp);
    const bool usable = std::fread(next, 1, sizeof next, c.fp) == sizeof next;
    const bool want_cancelled = kind != 5;
    const bool right = cancelled == want_cancelled && c.returned == !want_cancelled && at == 0 &&
                       stream_at == (kind < 4         ? 0
                                     : want_cancelled ? 4096
                                                      : 100 + (2l << 20)) &&
                       usable;
    if (!right) {
      ok = false;
      std::printf(
          "cancel-read %s: cancelled %d, returned %d, offset %ld, stream at %ld, usable %d\n",
          names[kind], cancelled, c.returned.load(), at, stream_at, usable);
    }
    std::fclose(c.fp);
    close(c.fd);
  }
  unlink(name);
  std::printf("%s cancel-read: a pending cancellation acts at each read as libc's\n",
              ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}

int query() {
  install(SIGSEGV, on_fault_jump);
  // A large copy first: with cmt it arms the host leg, which puts its own handler in front.
  char* src = map_anon(kBytes);
  char* dst = map_anon(kBytes);
  std::memcpy(dst, src, kBytes);
  struct sigaction now {};
  sigaction(SIGSEGV, nullptr, &now);
  const bool ok = (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_fault_jump;
  signal(SIGSEGV, SIG_DFL);
  sigaction(SIGSEGV, nullptr, &now);
  const bool dfl = !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL;
  std::printf("%s query: the program's handler %s, SIG_DFL %s\n", ok && dfl ? "ok" : "FAIL",
              ok ? "seen" : "NOT SEEN", dfl ? "seen" : "NOT SEEN");
  return ok && dfl ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
    return 2;
  }
  g_caller = tid();
  void* pinned = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS) return 77;  // no GPU
  if (cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS || cuMemAllocHost(&pinned, 2u << 20) != CUDA_SUCCESS)
    return 2;
  const std::string name = argv[1];
  if (name == "guard-src" || name == "guard-dst" || name == "truncated-src" ||
      name == "fill-readonly" || name == "fill-truncated")
    return fault_scenario(name);
  if (name == "mend") return mend();
  if (name == "signal-api") return signal_api();
  if (name == "no-handler") return no_handler();
  if (name == "alarm-longjmp") return alarm_longjmp();
  if (name == "cancel") return cancel();
  if (name == "sigqueue") return sigqueue_scenario();
  if (name == "query") return query();
  if (name == "cancel-read") return cancel_read(pinned);
  if (name == "cancel-copy") {
    g_context = context;
    return cancel_copy();
  }
  if (name == "probe") return 0;  // CUDA is there
  std::fprintf(stderr, "unknown scenario %s\n", argv[1]);
  return 2;
}
