#include "interposer/host_leg.h"

#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <mutex>

#include "common/engine_rules.h"
#include "common/log.h"
#include "common/thread_context.h"
#include "engine/shared/fresh_pages.h"
#include "interposer/page_map.h"
#include "interposer/recorder.h"
#include "interposer/signal_chain.h"

namespace cmt {
namespace {

bool overlap(const void* a, const void* b, std::size_t bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

HostLeg g_host_leg;  // constant-initialized (constexpr constructor), trivially destructible

// How often the kernel is asked whether cmt's fault handler is still in front: a program that
// replaces it past the hooks (a raw system call) is noticed within this, and each question costs
// two system calls, too many for every call.
constexpr long long kHandlerCheckNs = 10'000'000;

// The caller held (common/caller_hold.h) for the copy threads' work, if it gave a hold: signals
// it handles are put aside until the work is done (the hook releases the hold and sends them).
class Held {
 public:
  explicit Held(CallerHold* hold) : hold_(hold) {
    if (!hold_) return;
    hold_->hold();
    outer_ = begin_deferring(hold_);
  }
  ~Held() {
    if (hold_) end_deferring(outer_);
  }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;

 private:
  CallerHold* hold_;
  CallerHold* outer_ = nullptr;
};

long long monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

}  // namespace

HostLeg& host_leg() {
  return g_host_leg;
}

void HostLeg::arm(HostCopier& copier, const Config& config) noexcept {
  copy_mode_.store(config.host_copy, std::memory_order_relaxed);
  reads_anywhere_.store(config.host_reads == HostReads::All || config.host_copy == HostCopy::All,
                        std::memory_order_relaxed);
  fill_mode_.store(config.host_fill, std::memory_order_relaxed);
  copier_.store(&copier, std::memory_order_release);
  // The thresholds last: a hook that sees one below SIZE_MAX finds the copier and modes set.
  if (config.host_copy != HostCopy::Off) {
    copy_threshold_.store(config.host_copy_threshold, std::memory_order_release);
    copy_gate_.store(std::min(config.host_copy_threshold, rules::kUnmappedCopyFrom),
                     std::memory_order_release);
    if (config.host_reads != HostReads::Off)
      read_threshold_.store(rules::kFileReadFrom, std::memory_order_release);
  }
  if (config.host_fill != HostFill::Off)
    fill_threshold_.store(config.host_fill_threshold, std::memory_order_release);
}

void HostLeg::disarm() noexcept {
  copy_gate_.store(kNever, std::memory_order_relaxed);
  copy_threshold_.store(kNever, std::memory_order_relaxed);
  fill_threshold_.store(kNever, std::memory_order_relaxed);
  read_threshold_.store(kNever, std::memory_order_relaxed);
}

void HostLeg::forget_in_child() noexcept {
  disarm();
  unmapped_copies_.store(0, std::memory_order_relaxed);
  copier_.store(nullptr, std::memory_order_release);
}

bool HostLeg::unmapped_into_pinned(const void* dst, const void* src, std::size_t bytes) const {
  if (!pinned().overlaps(dst, bytes) || pinned().overlaps(src, bytes)) return false;
  // The middle page: a loader's tensors lie end to end in its file, so the first page may be one
  // the tensor before faulted in (with the pages the kernel maps around each fault).
  const PageEntry middle = page_entry(static_cast<const char*>(src) + bytes / 2);
  return middle.known && !middle.present;
}

bool HostLeg::faults_caught() noexcept {
  if (pinned_) return true;  // a test's leg
  const long long now = monotonic_ns();
  long long checked = handlers_checked_ns_.load(std::memory_order_relaxed);
  if (checked > 0 && now - checked < kHandlerCheckNs) return true;
  if (!fault_handlers_in_front()) {
    // Said in the statistics, not logged: this may run inside malloc, where logging may not.
    handler_displaced_.store(true, std::memory_order_relaxed);
    disarm();
    return false;
  }
  handlers_checked_ns_.store(now, std::memory_order_relaxed);
  return true;
}

std::size_t HostLeg::take_copy(void* dst, const void* src, std::size_t bytes,
                               CallerHold* hold) noexcept {
  const std::size_t threshold = copy_threshold_.load(std::memory_order_acquire);
  if (bytes == 0 || threshold == kNever) return 0;  // not armed
  const bool under = bytes < threshold;
  if (under && bytes < rules::kUnmappedCopyFrom) return 0;
  // Overlapping ranges are libc's, memcpy's as well as memmove's: glibc's x86-64 memcpy moves
  // them as memmove does, and programs rely on it.
  if (!t_thread.application_call() || overlap(dst, src, bytes)) return 0;
  HostCopier* copier = copier_.load(std::memory_order_acquire);
  if (!copier) return 0;
  const HostCopy mode = copy_mode_.load(std::memory_order_relaxed);
  if (mode == HostCopy::Off) return 0;
  if (under) {
    if (!unmapped_into_pinned(dst, src, bytes)) return 0;
  } else if (mode == HostCopy::Pinned && !pinned().overlaps(dst, bytes) &&
             !pinned().overlaps(src, bytes)) {
    return 0;  // pinned: only a copy that fills or empties CUDA host memory (a library's staging)
  }
  if (!faults_caught()) return 0;
  if (under) unmapped_copies_.fetch_add(1, std::memory_order_relaxed);
  Held held(hold);
  const std::uint64_t start = Recorder::started() ? record_clock_ns() : 0;
  const std::size_t done = copier->copy(dst, src, bytes);
  if (start) record_host_call("memcpy", bytes, done, start);
  return done;
}

std::size_t HostLeg::take_fill(void* dst, int value, std::size_t bytes, CallerHold* hold) noexcept {
  const std::size_t threshold = fill_threshold_.load(std::memory_order_acquire);
  if (bytes == 0 || bytes < threshold || threshold == kNever) return 0;  // not armed
  if (!t_thread.application_call()) return 0;
  HostCopier* copier = copier_.load(std::memory_order_acquire);
  if (!copier) return 0;
  const HostFill mode = fill_mode_.load(std::memory_order_relaxed);
  if (mode == HostFill::Off) return 0;
  // fresh: only a destination none of whose sampled pages exists yet (a new buffer's first fill).
  if (mode == HostFill::Fresh && !find_fresh(FreshPages::Populate, dst, bytes).count) return 0;
  if (!faults_caught()) return 0;
  Held held(hold);
  const std::uint64_t start = Recorder::started() ? record_clock_ns() : 0;
  const std::size_t done = copier->fill(dst, value, bytes);
  if (start) record_host_call("memset", bytes, done, start);
  return done;
}

namespace {

// The last descriptor this thread's readv found to be no file it may read in stretches, and for
// how many more of its calls on it that stands (HostLeg::kNotFileCalls). Initial-exec, as every
// thread-local of cmt's (common/thread_context.h): no allocation on a thread's first read.
thread_local int t_not_file_fd __attribute__((tls_model("initial-exec"))) = -1;
thread_local unsigned t_not_file_left __attribute__((tls_model("initial-exec"))) = 0;

// Whether `fd` is a regular file open for reading, without O_DIRECT (whose alignment rules a
// stretch of a read need not keep), that says it holds bytes: what cmt may read in stretches.
// procfs's files, and others the kernel makes as they are read, say 0: a read of them at an
// offset is made afresh, so stretches read apart could join two versions of the file.
bool readable_regular_file(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return false;
  const int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && (flags & O_ACCMODE) != O_WRONLY && (flags & O_DIRECT) == 0;
}

// read() and readv() of `bytes` from the descriptor's offset: the offset moved past them at once,
// in one lseek, which the kernel orders with every other read and lseek of the file as it orders
// reads among themselves; so a read another thread makes meanwhile gets the bytes after these, as
// it would after one read. Returns where the bytes start, or -1 (nothing moved).
off_t claim_bytes(int fd, std::size_t bytes) {
  const off_t end = lseek(fd, static_cast<off_t>(bytes), SEEK_CUR);
  return end < 0 ? -1 : end - static_cast<off_t>(bytes);
}

// A claimed read that came short (the end of the file, an error): the offset where one read
// would have left it, past the bytes read.
void give_back_unread(int fd, off_t at, std::size_t bytes, std::size_t read) {
  if (read < bytes) lseek(fd, at + static_cast<off_t>(read), SEEK_SET);
}

#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008  // Linux 4.14
#endif

// Whether the byte at `at` of the file (at < 0: at the descriptor's offset) is in the page cache:
// one byte read with RWF_NOWAIT, which the kernel answers only from the cache (EAGAIN otherwise;
// a filesystem without it, as FUSE's, or a kernel before 4.14 says no as well). A read of ordinary
// memory is taken only then: stretches of a file in the cache are read at many times one thread's
// rate (bench/lab/NOTES.md 47), while parallel reads of a file still on a disk would trade its
// sequential read-ahead for seeks. A system call, not the hooked preadv2, and it moves no offset.
bool cached_from(int fd, long long at) {
  if (at < 0) at = lseek(fd, 0, SEEK_CUR);
  if (at < 0) return false;
  char byte;
  iovec one{&byte, 1};
  return syscall(SYS_preadv2, fd, &one, 1, static_cast<long>(at), 0L, RWF_NOWAIT) == 1;
}

// Whether [p, p + n) ends below the top of the user address space, which the kernel asks of a
// read's buffer before it reads anything (access_ok): a range past it, as a huge count gives
// (read(fd, buf, SIZE_MAX)), is EFAULT there with nothing read, where cmt's stretches would read
// the file into the buffer and on past it up to the first bad page. The top is taken as the power
// of two above the process's first stack (where the kernel put AT_RANDOM's bytes; a thread's own
// stack may lie anywhere, even low in the heap), less 64 KiB (x86-64: 2^47, where the kernel's is
// 2^47 - 4 KiB, or 2^56 with 5-level paging; AArch64: 2^39 to 2^52 by its configuration): at or
// under the kernel's own, so that a read it would take and this refuses is only libc's, as exact.
bool below_user_top(const void* p, std::size_t n) {
  static const std::uintptr_t top = [] {
    std::uintptr_t stack = getauxval(AT_RANDOM);
    if (stack == 0) stack = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    return (std::uintptr_t{1} << (64 - __builtin_clzll(stack))) - (std::uintptr_t{1} << 16);
  }();
  std::uintptr_t end = 0;
  return !__builtin_add_overflow(reinterpret_cast<std::uintptr_t>(p), n, &end) && end <= top;
}

// One pread on the calling thread, for what the copy threads could not take once the bytes are
// claimed (a system call, not the hooked pread).
HostCopier::ReadResult pread_here(int fd, void* dst, std::size_t bytes, off_t at) {
  const long got = syscall(SYS_pread64, fd, dst, bytes, at);
  return {true, got < 0 ? 0 : static_cast<std::size_t>(got), got < 0 ? errno : 0};
}

}  // namespace

std::optional<HostCopier::ReadFor> HostLeg::reads_into(const void* dst, std::size_t bytes,
                                                       ReadsAnywhere& anywhere, int fd,
                                                       long long offset) const {
  if (pinned().overlaps(dst, bytes)) return HostCopier::ReadFor::Dma;
  if (anywhere == ReadsAnywhere::Unasked)
    anywhere = reads_anywhere_.load(std::memory_order_relaxed) && cached_from(fd, offset)
                   ? ReadsAnywhere::Yes
                   : ReadsAnywhere::No;
  if (anywhere == ReadsAnywhere::No) return std::nullopt;
  return HostCopier::ReadFor::Cpu;
}

HostLeg::ReadTaken HostLeg::take_read(int fd, void* dst, std::size_t bytes, long long offset,
                                      CallerHold* hold) noexcept {
  const std::size_t threshold = read_threshold_.load(std::memory_order_acquire);
  if (bytes < threshold || threshold == kNever) return {};  // not armed
  if (!t_thread.application_call()) return {};
  HostCopier* copier = copier_.load(std::memory_order_acquire);
  if (!copier || !below_user_top(dst, bytes) || !readable_regular_file(fd)) return {};
  ReadsAnywhere anywhere = ReadsAnywhere::Unasked;
  const std::optional<HostCopier::ReadFor> next = reads_into(dst, bytes, anywhere, fd, offset);
  if (!next) return {};
  bytes = std::min(bytes, rules::kMostReadBytes);
  const bool moves = offset < 0;  // read(): from the descriptor's offset, which it moves
  const off_t at = moves ? claim_bytes(fd, bytes) : static_cast<off_t>(offset);
  if (at < 0) return {};
  Held held(hold);
  const std::uint64_t start = Recorder::started() ? record_clock_ns() : 0;
  HostCopier::ReadResult r = copier->read_file(fd, dst, bytes, at, *next);
  if (!r.taken) {
    if (!moves) return {};               // pread: libc's, untouched
    r = pread_here(fd, dst, bytes, at);  // the bytes are claimed: read them here
  }
  if (start) record_host_call(moves ? "read" : "pread", bytes, r.bytes, start);
  if (moves) give_back_unread(fd, at, bytes, r.bytes);
  if (r.bytes == 0 && r.error) return {true, -1, r.error};
  return {true, static_cast<long>(r.bytes), 0};
}

HostLeg::ReadTaken HostLeg::take_readv(int fd, const struct iovec* segments, int count,
                                       long long offset, CallerHold* hold) noexcept {
  const std::size_t threshold = read_threshold_.load(std::memory_order_acquire);
  if (threshold == kNever || count <= 0 || count > rules::kMostReadSegments) return {};
  if (fd == t_not_file_fd && t_not_file_left > 0) {
    --t_not_file_left;
    return {};
  }
  if (!t_thread.application_call()) return {};
  HostCopier* copier = copier_.load(std::memory_order_acquire);
  if (!copier) return {};
  if (!readable_regular_file(fd)) {
    t_not_file_fd = fd;
    t_not_file_left = kNotFileCalls;
    return {};
  }
  // The list copied by the kernel: a list it could not read is the program's readv's EFAULT.
  iovec list[rules::kMostReadSegments];
  const std::size_t list_bytes = sizeof(iovec) * static_cast<std::size_t>(count);
  const iovec into{list, list_bytes}, from{const_cast<iovec*>(segments), list_bytes};
  if (process_vm_readv(getpid(), &into, 1, &from, 1, 0) != static_cast<ssize_t>(list_bytes))
    return {};
  std::size_t total = 0;
  bool on_threads = false;
  ReadsAnywhere anywhere = ReadsAnywhere::Unasked;  // asked once, at the list's first byte
  const auto threads_read = [&](const iovec& segment) -> std::optional<HostCopier::ReadFor> {
    if (segment.iov_len < threshold) return std::nullopt;
    return reads_into(segment.iov_base, segment.iov_len, anywhere, fd, offset);
  };
  for (int i = 0; i < count; ++i) {
    if (__builtin_add_overflow(total, list[i].iov_len, &total) || total > rules::kMostReadBytes ||
        !below_user_top(list[i].iov_base, list[i].iov_len))
      return {};
    on_threads |= threads_read(list[i]).has_value();
  }
  if (!on_threads) return {};
  const off_t first = offset >= 0 ? static_cast<off_t>(offset) : claim_bytes(fd, total);
  if (first < 0) return {};
  Held held(hold);
  const std::uint64_t start = Recorder::started() ? record_clock_ns() : 0;
  std::size_t done = 0;
  int error = 0;
  for (int i = 0; i < count; ++i) {
    const std::size_t want = list[i].iov_len;
    const off_t at = first + static_cast<off_t>(done);
    HostCopier::ReadResult r;
    if (const auto next = threads_read(list[i]))
      r = copier->read_file(fd, list[i].iov_base, want, at, *next);
    if (!r.taken) r = pread_here(fd, list[i].iov_base, want, at);  // small, or threads held
    done += r.bytes;
    if (r.bytes < want) {
      error = r.error;
      break;
    }
  }
  if (start) record_host_call(offset >= 0 ? "preadv" : "readv", total, done, start);
  if (offset < 0) give_back_unread(fd, first, total, done);
  if (done == 0 && error) return {true, -1, error};
  return {true, static_cast<long>(done), 0};
}

bool arm_host_leg(const Config& config, unsigned threads, const std::vector<int>& cpus) noexcept {
  HostLeg& leg = host_leg();
  if (config.host_copy == HostCopy::Off && config.host_fill == HostFill::Off) return false;
  if (!leg.hooks_loaded()) return false;  // no calls can come: no threads for them
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  if (leg.copier()) return true;
  static bool failed = false;
  if (failed) return false;
  if (!install_signal_chain()) {
    failed = true;
    CMT_WARN_ONCE("cmt's SIGSEGV/SIGBUS handler could not be installed; libc makes every memcpy");
    return false;
  }
  try {
    auto* copier = new HostCopier(config, threads, cpus);  // lives as long as the process
    leg.arm(*copier, config);
    CMT_LOG(info, "host copies ({}) of {} or more and fills ({}) of {} or more on {} threads",
            choice_name(config.host_copy), format_byte_size(config.host_copy_threshold),
            choice_name(config.host_fill), format_byte_size(config.host_fill_threshold),
            copier->threads());
    return true;
  } catch (...) {
    failed = true;
    CMT_WARN_ONCE("the host-copy threads could not start; libc makes every memcpy");
    return false;
  }
}

}  // namespace cmt
