// libcmt-host.so: hooks of the C library's copies and fills, memcpy, memmove, memset and their
// fortified forms (hook_table.h's CMT_HOST_LIBRARY_EXPORTS), and of its file reads, read and pread
// with theirs, readv, preadv and preadv2 with their 64-bit names, fread and fread_unlocked with
// theirs, preloaded beside libcmt.so where host copies or fills are on. A large read is
// offered to the host leg, which reads a regular file into CUDA host memory on its threads.
// It holds no state: the thresholds and the copy come from the host leg in libcmt-engine.so, as one
// table (hooks/host_leg_abi.h) that the engine hands over when libcmt.so loads it, on the first
// CUDA call; until then, and without libcmt.so, every call goes to libc.
//
// Most calls are tiny (memset's as well as memcpy's), and the hook must cost them next to nothing:
// up to 128 bytes it copies or fills them itself, as fast as libc's own small path
// (small_copies.h), in the variant this library was built for (SSE2, or AVX2 in
// libcmt-host-avx2.so); a call below the threshold (every call until the host leg is armed) jumps to libc's
// function after one compare. Larger ones are handed to the host leg (interposer/host_leg.h),
// which declines whatever it should not take.
//
// libc's functions are found once, in a constructor, with dlvsym (which cmt does not hook). A call
// made before that, by a library initialised earlier, is copied by a plain byte loop here.
//
// A call the host leg takes leaves the thread held (common/caller_hold.h) and the hook releases
// it; a fault that stopped cmt's threads leaves the rest of the call to libc's function, here, on
// the program's thread. Neither the hooks nor their slow paths are noexcept: a cancellation acting
// at the release, or in libc's function, unwinds through them as through libc's own memcpy.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "common/engine_rules.h"
#include "hooks/host_library.h"
#include "hooks/small_copies.h"

namespace cmt::hooks {
namespace {

using CopyFn = void* (*)(void*, const void*, std::size_t) noexcept;
using CheckedCopyFn = void* (*)(void*, const void*, std::size_t, std::size_t) noexcept;
using FillFn = void* (*)(void*, int, std::size_t) noexcept;
using CheckedFillFn = void* (*)(void*, int, std::size_t, std::size_t) noexcept;
using ReadFn = ssize_t (*)(int, void*, std::size_t);
using CheckedReadFn = ssize_t (*)(int, void*, std::size_t, std::size_t);
using PreadFn = ssize_t (*)(int, void*, std::size_t, off_t);
using CheckedPreadFn = ssize_t (*)(int, void*, std::size_t, off_t, std::size_t);
using FreadFn = std::size_t (*)(void*, std::size_t, std::size_t, FILE*);
using CheckedFreadFn = std::size_t (*)(void*, std::size_t, std::size_t, std::size_t, FILE*);
using ReadvFn = ssize_t (*)(int, const iovec*, int);
using PreadvFn = ssize_t (*)(int, const iovec*, int, off_t);
using Preadv2Fn = ssize_t (*)(int, const iovec*, int, off_t, int);

// Copies forwards or backwards by bytes (memmove's meaning), for the moment before libc's
// functions are known. `rep movsb` cannot be turned into a call to memcpy by the compiler.
void* early_move(void* dst, const void* src, std::size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (d == s || n == 0) return dst;
#if defined(__x86_64__)
  if (d < s || d >= s + n) {
    asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  } else {
    d += n - 1;
    s += n - 1;
    asm volatile("std\n\trep movsb\n\tcld" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  }
#else
  if (d < s) {
    for (std::size_t i = 0; i < n; ++i) reinterpret_cast<volatile unsigned char*>(d)[i] = s[i];
  } else {
    for (std::size_t i = n; i-- > 0;) reinterpret_cast<volatile unsigned char*>(d)[i] = s[i];
  }
#endif
  return dst;
}

void* early_checked_move(void* dst, const void* src, std::size_t n, std::size_t) noexcept {
  return early_move(dst, src, n);
}

void* early_fill(void* dst, int value, std::size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
#if defined(__x86_64__)
  asm volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(value) : "memory");
#else
  for (std::size_t i = 0; i < n; ++i)
    reinterpret_cast<volatile unsigned char*>(d)[i] = static_cast<unsigned char>(value);
#endif
  return dst;
}

void* early_checked_fill(void* dst, int value, std::size_t n, std::size_t) noexcept {
  return early_fill(dst, value, n);
}

// The system calls themselves, for reads before libc's functions are known; a fortified call past
// its buffer stops the process there, as libc's would.
ssize_t early_read(int fd, void* buf, std::size_t n) {
  return syscall(SYS_read, fd, buf, n);
}
ssize_t early_checked_read(int fd, void* buf, std::size_t n, std::size_t room) {
  if (n > room) __builtin_trap();
  return early_read(fd, buf, n);
}
ssize_t early_pread(int fd, void* buf, std::size_t n, off_t offset) {
  return syscall(SYS_pread64, fd, buf, n, offset);
}
ssize_t early_readv(int fd, const iovec* iov, int count) {
  return syscall(SYS_readv, fd, iov, count);
}
// The kernel's preadv takes the offset as two words (low, high); on a 64-bit ABI the low one holds
// all of it.
ssize_t early_preadv(int fd, const iovec* iov, int count, off_t offset) {
  return syscall(SYS_preadv, fd, iov, count, offset, 0);
}
ssize_t early_preadv2(int fd, const iovec* iov, int count, off_t offset, int flags) {
  return syscall(SYS_preadv2, fd, iov, count, offset, 0, flags);
}
ssize_t early_checked_pread(int fd, void* buf, std::size_t n, off_t offset, std::size_t room) {
  if (n > room) __builtin_trap();
  return early_pread(fd, buf, n, offset);
}

// The engine's host leg (hooks/host_leg_abi.h): until its table arrives, no copy is large enough
// to hand over. Set once, from whichever thread loads the engine, while other threads copy: hence
// atomics, read relaxed on the fast path (a plain load on x86-64 and AArch64) since the value
// behind is itself atomic, and with acquire before the table is used.
using Threshold = std::atomic<std::size_t>;
const Threshold kNever{std::numeric_limits<std::size_t>::max()};
std::atomic<const Threshold*> g_threshold{&kNever};
std::atomic<const Threshold*> g_fill_threshold{&kNever};
std::atomic<const Threshold*> g_read_threshold{&kNever};
ReadFn g_read = early_read;
CheckedReadFn g_read_chk = early_checked_read;
PreadFn g_pread = early_pread;
PreadFn g_pread64 = early_pread;
CheckedPreadFn g_pread_chk = early_checked_pread;
CheckedPreadFn g_pread64_chk = early_checked_pread;
ReadvFn g_readv = early_readv;
PreadvFn g_preadv = early_preadv;
PreadvFn g_preadv64 = early_preadv;
Preadv2Fn g_preadv2 = early_preadv2;
Preadv2Fn g_preadv64v2 = early_preadv2;
// libc's fread: found by the constructor, or by the first call if a library's constructor reads a
// stream before ours has run.
std::size_t early_fread(void* ptr, std::size_t size, std::size_t count, FILE* fp);
FreadFn g_fread = early_fread;
std::size_t early_fread_unlocked(void* ptr, std::size_t size, std::size_t count, FILE* fp);
FreadFn g_fread_unlocked = early_fread_unlocked;
// The fortified freads are found by the constructor (before any program code runs); a fortified
// fread before that is the plain one's, unchecked.
std::size_t unchecked_fread(void* ptr, std::size_t, std::size_t size, std::size_t count, FILE* fp) {
  return g_fread(ptr, size, count, fp);
}
std::size_t unchecked_fread_unlocked(void* ptr, std::size_t, std::size_t size, std::size_t count,
                                     FILE* fp) {
  return g_fread_unlocked(ptr, size, count, fp);
}
CheckedFreadFn g_fread_chk = unchecked_fread;
CheckedFreadFn g_fread_unlocked_chk = unchecked_fread_unlocked;
// Finds libc's `name` into `slot`, and calls it.
std::size_t first_fread(FreadFn* slot, const char* name, void* ptr, std::size_t size,
                        std::size_t count, FILE* fp) {
#if defined(__x86_64__)
  void* fn = dlvsym(RTLD_NEXT, name, "GLIBC_2.2.5");
#else
  void* fn = dlvsym(RTLD_NEXT, name, "GLIBC_2.17");
#endif
  if (!fn) return 0;
  *slot = reinterpret_cast<FreadFn>(fn);
  return (*slot)(ptr, size, count, fp);
}
std::size_t early_fread(void* ptr, std::size_t size, std::size_t count, FILE* fp) {
  return first_fread(&g_fread, "fread", ptr, size, count, fp);
}
std::size_t early_fread_unlocked(void* ptr, std::size_t size, std::size_t count, FILE* fp) {
  return first_fread(&g_fread_unlocked, "fread_unlocked", ptr, size, count, fp);
}
// libc's _IO_doallocbuf, which makes a stream's buffer as its fread would (found by the
// constructor; without it, a stream with no buffer yet is libc's to read).
void (*g_doallocbuf)(FILE*) = nullptr;
FillFn g_memset = early_fill;
CheckedFillFn g_memset_chk = early_checked_fill;

CopyFn g_memcpy = early_move;
CopyFn g_memmove = early_move;
CheckedCopyFn g_memcpy_chk = early_checked_move;
CheckedCopyFn g_memmove_chk = early_checked_move;

}  // namespace

std::atomic<const HostLegAbi*> g_host_leg{nullptr};

namespace {

template <typename Fn>
void find(Fn* slot, const char* name, const char* version) {
  if (void* fn = dlvsym(RTLD_NEXT, name, version)) *slot = reinterpret_cast<Fn>(fn);
}

// Before other libraries' constructors where the loader allows (priority 101); and again, at no
// cost, if the engine attaches before this library's constructors have run.
__attribute__((constructor(101))) void find_libc_copies() noexcept {
#if defined(__x86_64__)
  find(&g_memcpy, "memcpy", "GLIBC_2.14");
  find(&g_memmove, "memmove", "GLIBC_2.2.5");
  find(&g_memcpy_chk, "__memcpy_chk", "GLIBC_2.3.4");
  find(&g_memmove_chk, "__memmove_chk", "GLIBC_2.3.4");
  find(&g_memset, "memset", "GLIBC_2.2.5");
  find(&g_memset_chk, "__memset_chk", "GLIBC_2.3.4");
  find(&g_read, "read", "GLIBC_2.2.5");
  find(&g_pread, "pread", "GLIBC_2.2.5");
  find(&g_pread64, "pread64", "GLIBC_2.2.5");
  find(&g_read_chk, "__read_chk", "GLIBC_2.4");
  find(&g_pread_chk, "__pread_chk", "GLIBC_2.4");
  find(&g_pread64_chk, "__pread64_chk", "GLIBC_2.4");
  find(&g_fread, "fread", "GLIBC_2.2.5");
  find(&g_fread_unlocked, "fread_unlocked", "GLIBC_2.2.5");
  find(&g_fread_chk, "__fread_chk", "GLIBC_2.7");
  find(&g_fread_unlocked_chk, "__fread_unlocked_chk", "GLIBC_2.7");
  find(&g_readv, "readv", "GLIBC_2.2.5");
  find(&g_preadv, "preadv", "GLIBC_2.10");
  find(&g_preadv64, "preadv64", "GLIBC_2.10");
  find(&g_preadv2, "preadv2", "GLIBC_2.26");
  find(&g_preadv64v2, "preadv64v2", "GLIBC_2.26");
  find(&g_doallocbuf, "_IO_doallocbuf", "GLIBC_2.2.5");
  find_signal_functions("GLIBC_2.2.5");
#else
  find(&g_memcpy, "memcpy", "GLIBC_2.17");
  find(&g_memmove, "memmove", "GLIBC_2.17");
  find(&g_memcpy_chk, "__memcpy_chk", "GLIBC_2.17");
  find(&g_memmove_chk, "__memmove_chk", "GLIBC_2.17");
  find(&g_memset, "memset", "GLIBC_2.17");
  find(&g_memset_chk, "__memset_chk", "GLIBC_2.17");
  find(&g_read, "read", "GLIBC_2.17");
  find(&g_pread, "pread", "GLIBC_2.17");
  find(&g_pread64, "pread64", "GLIBC_2.17");
  find(&g_read_chk, "__read_chk", "GLIBC_2.17");
  find(&g_pread_chk, "__pread_chk", "GLIBC_2.17");
  find(&g_pread64_chk, "__pread64_chk", "GLIBC_2.17");
  find(&g_fread, "fread", "GLIBC_2.17");
  find(&g_fread_unlocked, "fread_unlocked", "GLIBC_2.17");
  find(&g_fread_chk, "__fread_chk", "GLIBC_2.17");
  find(&g_fread_unlocked_chk, "__fread_unlocked_chk", "GLIBC_2.17");
  find(&g_readv, "readv", "GLIBC_2.17");
  find(&g_preadv, "preadv", "GLIBC_2.17");
  find(&g_preadv64, "preadv64", "GLIBC_2.17");
  find(&g_preadv2, "preadv2", "GLIBC_2.26");
  find(&g_preadv64v2, "preadv64v2", "GLIBC_2.26");
  find(&g_doallocbuf, "_IO_doallocbuf", "GLIBC_2.17");
  find_signal_functions("GLIBC_2.17");
#endif
}

// The slow paths, out of line so that the hooks' fast path is a compare and a jump. `done`
// leading bytes made by cmt, the rest by libc (all of it when cmt took nothing).
__attribute__((noinline)) void* large_copy(CopyFn libc, void* dst, const void* src,
                                           std::size_t n) {
  std::size_t done = 0;
  if (const HostLegAbi* leg = g_host_leg.load(std::memory_order_acquire)) {
    cmt::CallerHold hold;
    hold.hold();  // before libcmt.so's frames: no cancellation may unwind them
    done = leg->copy(dst, src, n, &hold);
    hold.release();
    if (done == n) return dst;
  }
  libc(static_cast<char*>(dst) + done, static_cast<const char*>(src) + done, n - done);
  return dst;
}

inline void* large_memcpy(void* dst, const void* src, std::size_t n) {
  return large_copy(g_memcpy, dst, src, n);
}

inline void* large_memmove(void* dst, const void* src, std::size_t n) {
  return large_copy(g_memmove, dst, src, n);
}

inline std::size_t host_copy_threshold() {
  return g_threshold.load(std::memory_order_relaxed)->load(std::memory_order_relaxed);
}

__attribute__((noinline)) void* large_memset(void* dst, int value, std::size_t n) {
  std::size_t done = 0;
  if (const HostLegAbi* leg = g_host_leg.load(std::memory_order_acquire)) {
    cmt::CallerHold hold;
    hold.hold();  // before libcmt.so's frames: no cancellation may unwind them
    done = leg->fill(dst, value, n, &hold);
    hold.release();
    if (done == n) return dst;
  }
  g_memset(static_cast<char*>(dst) + done, value, n - done);
  return dst;
}

inline std::size_t host_fill_threshold() {
  return g_fill_threshold.load(std::memory_order_relaxed)->load(std::memory_order_relaxed);
}

inline std::size_t host_read_threshold() {
  return g_read_threshold.load(std::memory_order_relaxed)->load(std::memory_order_relaxed);
}

// A large read (read's when `offset` is negative) offered to the host leg; what it does not take,
// `libc_pread` or `libc_read` makes.
__attribute__((noinline)) ssize_t large_read(int fd, void* buf, std::size_t n, off_t offset,
                                             ReadFn libc_read, PreadFn libc_pread) {
  if (const HostLegAbi* leg = g_host_leg.load(std::memory_order_acquire)) {
    pthread_testcancel();  // read is a cancellation point: one pending acts before it reads
    // errno as libc leaves it: the leg's own system calls (the page-cache probe's EAGAIN among
    // them) and the release's may set it, where a read that succeeds leaves it alone.
    const int saved = errno;
    cmt::CallerHold hold;
    hold.hold();  // before libcmt.so's frames: no cancellation may unwind them
    const HostRead r = leg->read(fd, buf, n, offset, &hold);
    hold.release();
    errno = r.taken && r.result < 0 ? r.error : saved;
    if (r.taken) return r.result;
  }
  return offset < 0 ? libc_read(fd, buf, n) : libc_pread(fd, buf, n, offset);
}

template <typename Libc>
__attribute__((noinline)) ssize_t large_readv(int fd, const iovec* iov, int count, off_t offset,
                                              Libc libc) {
  if (const HostLegAbi* leg = g_host_leg.load(std::memory_order_acquire)) {
    pthread_testcancel();     // as large_read's
    const int saved = errno;  // as large_read keeps it
    cmt::CallerHold hold;
    hold.hold();  // before libcmt.so's frames: no cancellation may unwind them
    const HostRead r = leg->readv(fd, iov, count, offset, &hold);
    hold.release();
    errno = r.taken && r.result < 0 ? r.error : saved;
    if (r.taken) return r.result;
  }
  return libc();
}

// The read hooks: one compare, then libc's function, below the threshold; a pread at a negative
// offset is libc's (EINVAL) whatever its size.
inline ssize_t hooked_read(int fd, void* buf, std::size_t n) {
  if (__builtin_expect(n < host_read_threshold(), 1)) return g_read(fd, buf, n);
  return large_read(fd, buf, n, -1, g_read, g_pread);
}

inline ssize_t hooked_pread(PreadFn libc_pread, int fd, void* buf, std::size_t n, off_t offset) {
  if (__builtin_expect(n < host_read_threshold(), 1) || offset < 0)
    return libc_pread(fd, buf, n, offset);
  return large_read(fd, buf, n, offset, g_read, libc_pread);
}

// readv (`offset` -1) and preadv offered to the host leg, which reads the list of segments and
// decides (HostLeg::take_readv); what it does not take, `libc` makes, with the program's own
// arguments. Only while reads are taken at all, and for lists the leg would look at: every other
// call is libc's after two compares.
template <typename Libc>
ssize_t hooked_readv(int fd, const iovec* iov, int count, off_t offset, Libc libc) {
  if (__builtin_expect(host_read_threshold() == SIZE_MAX, 1) || count <= 0 ||
      count > rules::kMostReadSegments)
    return libc();
  return large_readv(fd, iov, count, offset, libc);
}

// preadv at a real offset; a negative one is libc's (EINVAL).
inline ssize_t hooked_preadv(PreadvFn libc, int fd, const iovec* iov, int count, off_t offset) {
  if (offset < 0) return libc(fd, iov, count, offset);
  return hooked_readv(fd, iov, count, offset, [=] { return libc(fd, iov, count, offset); });
}

// preadv2 without flags, at a real offset or at -1 (readv's); other flags (RWF_*) and offsets are
// libc's.
inline ssize_t hooked_preadv2(Preadv2Fn libc, int fd, const iovec* iov, int count, off_t offset,
                              int flags) {
  if (flags != 0 || offset < -1) return libc(fd, iov, count, offset, flags);
  return hooked_readv(fd, iov, count, offset, [=] { return libc(fd, iov, count, offset, flags); });
}

// glibc's stream flags that are not in its public headers (libio/libio.h), part of its ABI.
constexpr int kNoReads = 0x0004;            // _IO_NO_READS: not open for reading
constexpr int kInBackup = 0x0100;           // _IO_IN_BACKUP: ungetc's pushback being read
constexpr int kCurrentlyPutting = 0x0800;   // _IO_CURRENTLY_PUTTING: in write mode
constexpr int kMappedStream = 0x0001;       // _IO_FLAGS2_MMAP in _flags2: fopen's "m"
constexpr int kNoCancelStream = 0x0002;     // _IO_FLAGS2_NOTCANCEL in _flags2: fopen's "c"

// Whether cmt may read past this stream's buffer as glibc's fread would: a byte stream (not
// wide) reading a file by its descriptor, in read mode, not reading ungetc's pushed-back bytes,
// its buffer made or makeable. Not a stream opened with "m": glibc reads those from its own
// mapping of the file, made at the first read, from where the stream's offset says (cmt's read
// would leave that offset unknown, and glibc would map from the file's start).
bool reads_by_descriptor(FILE* fp, int fd) {
  return fd >= 0 && fp->_mode <= 0 &&
         (fp->_flags & (kNoReads | kInBackup | kCurrentlyPutting)) == 0 &&
         (fp->_flags2 & kMappedStream) == 0 && fp->_IO_write_ptr <= fp->_IO_write_base &&
         (fp->_IO_buf_base || (!fp->_IO_save_base && g_doallocbuf));
}

// The reads glibc's fread makes into the caller's memory past the stream's buffer (libio's
// _IO_file_xsgetn): while at least a block (the stream buffer's size) is wanted, one read of as
// many whole blocks as fit (of all that is wanted where the block is under 128 bytes), again
// after a short one (one read() moves at most 0x7ffff000 bytes, and so does the host leg's);
// what is left, under a block, glibc reads into the stream's buffer. Each read by the host leg
// where it takes it, else by libc's read, the thread held throughout; a first read the leg does
// not take is the caller's to leave to libc's fread, nothing read. Adds what it reads to `*got`;
// returns the read that failed or found the end of the file (0), else a result of 1.
HostRead read_blocks(const HostLegAbi* leg, int fd, char* to, std::size_t want, std::size_t block,
                     std::size_t* got, cmt::CallerHold* hold) {
  while (want - *got >= block) {
    const std::size_t left = want - *got;
    const std::size_t ask = block >= 128 ? left - left % block : left;
    HostRead r = leg->read(fd, to + *got, ask, -1, hold);
    if (!r.taken) {
      if (*got == 0) return r;
      r = HostRead{true, g_read(fd, to + *got, ask), errno};
    }
    if (r.result <= 0) return r;
    *got += static_cast<std::size_t>(r.result);
  }
  return HostRead{true, 1, 0};
}

// The bytes still in the stream's buffer into the caller's memory, and the buffer emptied, as
// glibc's fread does before it reads past the buffer (left describing the bytes it held, a later
// fseek into their range would be served from them).
void take_buffered(FILE* fp, void* ptr, std::size_t have) {
  if (have) __builtin_memcpy(ptr, fp->_IO_read_ptr, have);
  fp->_IO_read_base = fp->_IO_read_ptr = fp->_IO_read_end = fp->_IO_buf_base;
  fp->_IO_write_base = fp->_IO_write_ptr = fp->_IO_write_end = fp->_IO_buf_base;
}

void unlock_stream(void* fp) {
  funlockfile(static_cast<FILE*>(fp));
}

// Where glibc's fread has its cancellation point, at its first read (none for a stream opened
// with "c"): a cancellation pending acts here, and the stream's lock, if this call took it, is
// given back on the way out, as glibc's fread gives it back.
void fread_cancellation_point(FILE* fp, bool locked) {
  if (fp->_flags2 & kNoCancelStream) return;
  if (!locked) {
    pthread_testcancel();
    return;
  }
  pthread_cleanup_push(unlock_stream, fp);
  pthread_testcancel();
  pthread_cleanup_pop(0);
}

// A large fread, as glibc's own fread makes it (libio's _IO_file_xsgetn), with its reads past
// the stream's buffer made by the host leg. Under the stream's lock (unless its caller does the
// locking, __fsetlocking's FSETLOCKING_BYCALLER): the stream's buffer made if it has none yet;
// the bytes still in it first; a cancellation point; the whole blocks from the descriptor's
// offset (read_blocks), moving it and the stream's cached offset as glibc moves them; end of file
// and errors flagged as glibc flags them; and the rest, under a block (all of it where the leg
// took no read), libc's fread itself (through the stream's buffer, as glibc reads it, a stream's
// end of file staying put). A stream that is not reads_by_descriptor, or a call with less than a
// block to read past the buffer, is libc's fread, nothing touched but the buffer glibc would make.
__attribute__((noinline)) std::size_t large_fread(void* ptr, std::size_t size, std::size_t count,
                                                  std::size_t bytes, FILE* fp, FreadFn libc,
                                                  bool lock) {
  const HostLegAbi* leg = g_host_leg.load(std::memory_order_acquire);
  if (!leg) return libc(ptr, size, count, fp);
  const bool locks = lock && (fp->_flags & _IO_USER_LOCK) == 0;
  if (locks) flockfile(fp);
  const int fd = fileno_unlocked(fp);
  std::size_t have = 0, block = 0;
  if (reads_by_descriptor(fp, fd)) {
    if (!fp->_IO_buf_base) g_doallocbuf(fp);  // as glibc's fread would
    if (fp->_IO_read_ptr < fp->_IO_read_end)
      have = static_cast<std::size_t>(fp->_IO_read_end - fp->_IO_read_ptr);
    block = static_cast<std::size_t>(fp->_IO_buf_end - fp->_IO_buf_base);
  }
  if (block == 0 || have >= bytes || bytes - have < block) {
    if (locks) funlockfile(fp);
    return libc(ptr, size, count, fp);
  }
  take_buffered(fp, ptr, have);
  fread_cancellation_point(fp, locks);
  const int saved = errno;  // as large_read keeps it
  std::size_t got = 0;
  cmt::CallerHold hold;
  hold.hold();  // before libcmt.so's frames: no cancellation may unwind them
  HostRead r =
      read_blocks(leg, fd, static_cast<char*>(ptr) + have, bytes - have, block, &got, &hold);
  hold.release();
  errno = r.taken && r.result < 0 ? r.error : saved;
  if (!r.taken) r = HostRead{true, 1, 0};  // the leg took none: libc's fread reads it all, below
  if (fp->_offset != -1) fp->_offset += static_cast<off_t>(got);
  std::size_t done = have + got;
  if (r.result < 0) {
    fp->_flags |= _IO_ERR_SEEN;
  } else if (r.result == 0) {
    fp->_flags |= _IO_EOF_SEEN;  // it read up to the file's end
  } else if (done < bytes) {
    done += libc(static_cast<char*>(ptr) + done, 1, bytes - done, fp);
  }
  if (locks) funlockfile(fp);
  return done == bytes ? count : done / size;
}

// fread takes the stream's lock; fread_unlocked's caller holds it (or needs none).
inline std::size_t hooked_fread(void* ptr, std::size_t size, std::size_t count, FILE* fp,
                                FreadFn libc, bool lock) {
  std::size_t bytes = 0;
  if (__builtin_expect(__builtin_mul_overflow(size, count, &bytes) ||
                           bytes < host_read_threshold(), 1))
    return libc(ptr, size, count, fp);
  return large_fread(ptr, size, count, bytes, fp, libc, lock);
}

// The fortified forms: a read past the buffer's known size is libc's `checked`, which reports it.
inline std::size_t hooked_checked_fread(void* ptr, std::size_t room, std::size_t size,
                                        std::size_t count, FILE* fp, CheckedFreadFn checked,
                                        FreadFn libc, bool lock) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(size, count, &bytes) || bytes > room)
    return checked(ptr, room, size, count, fp);
  return hooked_fread(ptr, size, count, fp, libc, lock);
}

}  // namespace
}  // namespace cmt::hooks

#define CMT_LIBC_EXPORT extern "C" __attribute__((visibility("default")))

// The engine's table (hooks/host_leg_abi.h), once: a second table, or one of another version, is
// refused, and every call keeps going to libc.
CMT_LIBC_EXPORT void cmt_host_library_attach(const cmt::HostLegAbi* table) noexcept {
  using namespace cmt::hooks;
  if (!table || table->version != cmt::kHostLegAbiVersion) return;
  const cmt::HostLegAbi* none = nullptr;
  if (!g_host_leg.compare_exchange_strong(none, table, std::memory_order_acq_rel)) return;
  if (!g_next_sigaction) find_libc_copies();
  g_threshold.store(table->copy_threshold, std::memory_order_release);
  g_fill_threshold.store(table->fill_threshold, std::memory_order_release);
  g_read_threshold.store(table->read_threshold, std::memory_order_release);
  table->hooks_loaded(g_next_sigaction);
}

// File reads (the same in every variant: a system call dwarfs the compare).
CMT_LIBC_EXPORT ssize_t read(int fd, void* buf, std::size_t n) {
  return cmt::hooks::hooked_read(fd, buf, n);
}
CMT_LIBC_EXPORT ssize_t __read_chk(int fd, void* buf, std::size_t n, std::size_t room) {
  if (__builtin_expect(n > room, 0)) return cmt::hooks::g_read_chk(fd, buf, n, room);
  return cmt::hooks::hooked_read(fd, buf, n);
}
CMT_LIBC_EXPORT ssize_t pread(int fd, void* buf, std::size_t n, off_t offset) {
  return cmt::hooks::hooked_pread(cmt::hooks::g_pread, fd, buf, n, offset);
}
CMT_LIBC_EXPORT ssize_t pread64(int fd, void* buf, std::size_t n, off_t offset) {
  return cmt::hooks::hooked_pread(cmt::hooks::g_pread64, fd, buf, n, offset);
}
CMT_LIBC_EXPORT ssize_t __pread_chk(int fd, void* buf, std::size_t n, off_t offset,
                                    std::size_t room) {
  if (__builtin_expect(n > room, 0)) return cmt::hooks::g_pread_chk(fd, buf, n, offset, room);
  return cmt::hooks::hooked_pread(cmt::hooks::g_pread, fd, buf, n, offset);
}
CMT_LIBC_EXPORT ssize_t __pread64_chk(int fd, void* buf, std::size_t n, off_t offset,
                                      std::size_t room) {
  if (__builtin_expect(n > room, 0)) return cmt::hooks::g_pread64_chk(fd, buf, n, offset, room);
  return cmt::hooks::hooked_pread(cmt::hooks::g_pread64, fd, buf, n, offset);
}

// readv and its positioned forms.
CMT_LIBC_EXPORT ssize_t readv(int fd, const struct iovec* iov, int count) {
  using namespace cmt::hooks;
  return hooked_readv(fd, iov, count, -1, [=] { return g_readv(fd, iov, count); });
}
CMT_LIBC_EXPORT ssize_t preadv(int fd, const struct iovec* iov, int count, off_t offset) {
  return cmt::hooks::hooked_preadv(cmt::hooks::g_preadv, fd, iov, count, offset);
}
CMT_LIBC_EXPORT ssize_t preadv64(int fd, const struct iovec* iov, int count, off_t offset) {
  return cmt::hooks::hooked_preadv(cmt::hooks::g_preadv64, fd, iov, count, offset);
}
CMT_LIBC_EXPORT ssize_t preadv2(int fd, const struct iovec* iov, int count, off_t offset,
                                int flags) {
  return cmt::hooks::hooked_preadv2(cmt::hooks::g_preadv2, fd, iov, count, offset, flags);
}
CMT_LIBC_EXPORT ssize_t preadv64v2(int fd, const struct iovec* iov, int count, off_t offset,
                                   int flags) {
  return cmt::hooks::hooked_preadv2(cmt::hooks::g_preadv64v2, fd, iov, count, offset, flags);
}

CMT_LIBC_EXPORT std::size_t fread(void* ptr, std::size_t size, std::size_t count, FILE* fp) {
  return cmt::hooks::hooked_fread(ptr, size, count, fp, cmt::hooks::g_fread, true);
}
CMT_LIBC_EXPORT std::size_t fread_unlocked(void* ptr, std::size_t size, std::size_t count,
                                           FILE* fp) {
  return cmt::hooks::hooked_fread(ptr, size, count, fp, cmt::hooks::g_fread_unlocked, false);
}
CMT_LIBC_EXPORT std::size_t __fread_chk(void* ptr, std::size_t room, std::size_t size,
                                        std::size_t count, FILE* fp) {
  using namespace cmt::hooks;
  return hooked_checked_fread(ptr, room, size, count, fp, g_fread_chk, g_fread, true);
}
CMT_LIBC_EXPORT std::size_t __fread_unlocked_chk(void* ptr, std::size_t room, std::size_t size,
                                                 std::size_t count, FILE* fp) {
  using namespace cmt::hooks;
  return hooked_checked_fread(ptr, room, size, count, fp, g_fread_unlocked_chk,
                              g_fread_unlocked, false);
}

// The hooks' bodies, one set per instruction set. Up to kSmallMost bytes they copy or fill
// themselves (small_copies.h); below the threshold they jump to libc's function; the rest goes to
// the host leg. A fortified call past the destination's known size goes to libc, which reports it.
#define CMT_LIBC_HOOKS(isa, attributes)                                                 \
  namespace cmt::hooks {                                                                \
  attributes void* memcpy_##isa(void* dst, const void* src, std::size_t n) {            \
    if (__builtin_expect(small::move_##isa(dst, src, n), 1)) return dst;                \
    if (__builtin_expect(n < host_copy_threshold(), 1)) return g_memcpy(dst, src, n);   \
    return large_memcpy(dst, src, n);                                                   \
  }                                                                                     \
  attributes void* memmove_##isa(void* dst, const void* src, std::size_t n) {           \
    if (__builtin_expect(small::move_##isa(dst, src, n), 1)) return dst;                \
    if (__builtin_expect(n < host_copy_threshold(), 1)) return g_memmove(dst, src, n);  \
    return large_memmove(dst, src, n);                                                  \
  }                                                                                     \
  attributes void* memcpy_chk_##isa(void* dst, const void* src, std::size_t n,          \
                                    std::size_t room) {                                 \
    if (__builtin_expect(n > room, 0)) return g_memcpy_chk(dst, src, n, room);          \
    return memcpy_##isa(dst, src, n);                                                   \
  }                                                                                     \
  attributes void* memmove_chk_##isa(void* dst, const void* src, std::size_t n,         \
                                     std::size_t room) {                                \
    if (__builtin_expect(n > room, 0)) return g_memmove_chk(dst, src, n, room);         \
    return memmove_##isa(dst, src, n);                                                  \
  }                                                                                     \
  attributes void* memset_##isa(void* dst, int value, std::size_t n) {         \
    if (__builtin_expect(small::fill_##isa(dst, value, n), 1)) return dst;              \
    if (__builtin_expect(n < host_fill_threshold(), 1)) return g_memset(dst, value, n); \
    return large_memset(dst, value, n);                                                 \
  }                                                                                     \
  attributes void* memset_chk_##isa(void* dst, int value, std::size_t n,                \
                                    std::size_t room) {                                 \
    if (__builtin_expect(n > room, 0)) return g_memset_chk(dst, value, n, room);        \
    return memset_##isa(dst, value, n);                                                 \
  }                                                                                     \
  }  // namespace cmt::hooks

#if defined(__x86_64__)

// One variant per library: libcmt-host.so holds the SSE2 hooks, which every x86-64 processor
// runs; libcmt-host-avx2.so (this file built with CMT_HOOKS_AVX2) the AVX2 ones, which `cmt run`
// preloads where the processor has AVX2 (cli/run_command.cpp). Each exported name is its variant's
// body, inlined, on a 64-byte boundary: no test of a CPU flag on a call. Not a GNU indirect
// function choosing at load: the loader would call its resolver while relocating the program's
// libraries that bind at load time (-z now, as Debian's libtinfo under bash), before
// libcmt-host.so itself, and print "Relink ... for IFUNC symbol" on stderr in every such process;
// and a branch on a flag cost the 64-byte memcpy 10% on the H200 (bench/lab/NOTES.md 42).
#if defined(CMT_HOOKS_AVX2)
#define CMT_ISA avx2
#define CMT_ISA_ATTRIBUTES CMT_AVX2
#else
#define CMT_ISA sse2
#define CMT_ISA_ATTRIBUTES
#endif
#define CMT_CONCAT2(a, b) a##_##b
#define CMT_CONCAT(a, b) CMT_CONCAT2(a, b)
#define CMT_VARIANT(name) cmt::hooks::CMT_CONCAT(name, CMT_ISA)
#define CMT_EXPORT_HOOK extern "C" __attribute__((visibility("default"), aligned(64))) CMT_ISA_ATTRIBUTES

#define CMT_LIBC_HOOKS_FOR(isa, attributes) CMT_LIBC_HOOKS(isa, attributes)  // isa expanded first
CMT_LIBC_HOOKS_FOR(CMT_ISA, inline CMT_ISA_ATTRIBUTES)

CMT_EXPORT_HOOK void* memcpy(void* d, const void* s, std::size_t n) {
  return CMT_VARIANT(memcpy)(d, s, n);
}
CMT_EXPORT_HOOK void* memmove(void* d, const void* s, std::size_t n) {
  return CMT_VARIANT(memmove)(d, s, n);
}
CMT_EXPORT_HOOK void* __memcpy_chk(void* d, const void* s, std::size_t n, std::size_t room) {
  return CMT_VARIANT(memcpy_chk)(d, s, n, room);
}
CMT_EXPORT_HOOK void* __memmove_chk(void* d, const void* s, std::size_t n, std::size_t room) {
  return CMT_VARIANT(memmove_chk)(d, s, n, room);
}
CMT_EXPORT_HOOK void* memset(void* d, int v, std::size_t n) {
  return CMT_VARIANT(memset)(d, v, n);
}
CMT_EXPORT_HOOK void* __memset_chk(void* d, int v, std::size_t n, std::size_t room) {
  return CMT_VARIANT(memset_chk)(d, v, n, room);
}

#else  // elsewhere: libc copies small calls too, after one compare

namespace cmt::small {
CMT_SMALL bool move_generic(void*, const void*, std::size_t) {
  return false;
}
CMT_SMALL bool fill_generic(void*, int, std::size_t) {
  return false;
}
}  // namespace cmt::small
CMT_LIBC_HOOKS(generic, )

CMT_LIBC_EXPORT void* memcpy(void* dst, const void* src, std::size_t n) {
  return cmt::hooks::memcpy_generic(dst, src, n);
}
CMT_LIBC_EXPORT void* memmove(void* dst, const void* src, std::size_t n) {
  return cmt::hooks::memmove_generic(dst, src, n);
}
CMT_LIBC_EXPORT void* __memcpy_chk(void* dst, const void* src, std::size_t n,
                                   std::size_t room) {
  return cmt::hooks::memcpy_chk_generic(dst, src, n, room);
}
CMT_LIBC_EXPORT void* __memmove_chk(void* dst, const void* src, std::size_t n,
                                    std::size_t room) {
  return cmt::hooks::memmove_chk_generic(dst, src, n, room);
}
CMT_LIBC_EXPORT void* memset(void* dst, int value, std::size_t n) {
  return cmt::hooks::memset_generic(dst, value, n);
}
CMT_LIBC_EXPORT void* __memset_chk(void* dst, int value, std::size_t n, std::size_t room) {
  return cmt::hooks::memset_chk_generic(dst, value, n, room);
}

#endif
