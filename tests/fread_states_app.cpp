// fread under cmt against glibc's own, stream state by stream state, for fread_states.sh. cmt's
// fread hook reads the file itself for a large fread (libc_hooks.cpp), so it must leave every
// stream exactly as glibc's fread would: the count, the bytes, end of file, error, errno, ftell,
// and the descriptor's own offset (a program may go on with read(fileno(fp)) or hand the
// descriptor to another library).
//
// Each scenario opens the same file twice in the same way (fopen's mode, setvbuf's buffering),
// brings both streams to the same state (a small read, an ungetc, end of file, a write, an
// append, ...),
// then makes the same steps on both: the large fread under test, a small one, another large one,
// an fseek and a large one, one across the end of the file and one after it. The first stream's
// freads are the program's (cmt's hook, under LD_PRELOAD), the second's libc's own, looked up in
// libc.so.6 past any preload. After every step everything above must agree.
//
// Last, a stream whose caller does its own locking (__fsetlocking FSETLOCKING_BYCALLER): glibc's
// fread does not take the stream's lock then, so another thread holding it must not hold up a
// large fread.
//
// Linked against the fake libcuda (its cuMemAllocHost arms cmt's host leg).
// usage: fread_states_app; prints "scenarios N steps N wrong N"; exits 1 on any difference.
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio_ext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using FreadFn = std::size_t (*)(void*, std::size_t, std::size_t, FILE*);
FreadFn g_libc_fread = nullptr;

constexpr std::size_t kFileSize = (9u << 20) + 4321;
constexpr std::size_t kMiB = 1u << 20;

// One side of a scenario: its stream, its fread, its buffers.
struct Side {
  FILE* fp = nullptr;
  FreadFn fread = nullptr;
  std::vector<unsigned char> into;
  std::vector<char> stdio_buffer;  // setvbuf's, where the scenario gives one
};

// What a step leaves behind.
struct Outcome {
  std::size_t got = 0;
  int eof = 0, error = 0, err_no = 0;
  long tell = 0;
  off_t fd_at = 0;
  bool operator==(const Outcome& o) const {
    return got == o.got && eof == o.eof && error == o.error && err_no == o.err_no &&
           tell == o.tell && fd_at == o.fd_at;
  }
};

// One fread and what it left; ftell too unless `tell` is false (glibc's ftell of a stream opened
// with "m" and not read yet takes the descriptor's offset for the stream's, which would hide a
// read that left the stream's own offset wrong until the next fread's bytes show it).
Outcome read_step(Side& s, std::size_t elem, std::size_t count, bool tell) {
  s.into.assign(elem * count + 64, 0xA5);
  Outcome o;
  errno = 0;
  o.got = s.fread(s.into.data(), elem, count, s.fp);
  o.err_no = errno;
  o.eof = std::feof(s.fp) != 0;
  o.error = std::ferror(s.fp) != 0;
  o.tell = tell ? std::ftell(s.fp) : -2;
  o.fd_at = lseek(fileno(s.fp), 0, SEEK_CUR);
  return o;
}

struct Scenario {
  const char* name;
  const char* mode;                                 // fopen's
  int buffering;                                    // setvbuf's mode, or -1 for none
  std::size_t buffer_size;                          // setvbuf's size (its own buffer)
  std::function<void(Side&)> before;                // brings a stream to the state
  std::function<void(const std::string&)> between;  // once, after both streams' `before`
  std::size_t elem, count;                          // the fread under test
};

long g_steps = 0;

// Runs one scenario on both sides; returns the steps that differed.
long scenario_wrong(const Scenario& sc, const std::string& path) {
  Side side[2];
  for (int k = 0; k < 2; ++k) {
    side[k].fp = std::fopen(path.c_str(), sc.mode);
    if (!side[k].fp) return 1;
    side[k].fread = k == 0 ? static_cast<FreadFn>(std::fread) : g_libc_fread;
    if (sc.buffering >= 0) {
      side[k].stdio_buffer.resize(sc.buffer_size);
      setvbuf(side[k].fp, sc.buffer_size ? side[k].stdio_buffer.data() : nullptr, sc.buffering,
              sc.buffer_size);
    }
    if (sc.before) sc.before(side[k]);
  }
  if (sc.between) sc.between(path);
  struct Step {
    const char* what;
    std::function<void(Side&)> seek;
    std::size_t elem, count;
    bool tell;
  };
  const Step steps[] = {
      {"the fread", nullptr, sc.elem, sc.count, false},
      {"a small fread", nullptr, 1, 3000, true},
      {"a second large fread", nullptr, 1, kMiB + 33, true},
      {"fseek, large fread", [](Side& s) { std::fseek(s.fp, 777, SEEK_SET); }, 1, 2 * kMiB + 5,
       true},
      {"across the end", nullptr, 1, kFileSize, true},
      {"after the end", nullptr, 1, 2 * kMiB, true},
  };
  long wrong = 0;
  for (const Step& step : steps) {
    Outcome o[2];
    for (int k = 0; k < 2; ++k) {
      if (step.seek) step.seek(side[k]);
      o[k] = read_step(side[k], step.elem, step.count, step.tell);
    }
    ++g_steps;
    const bool same_bytes =
        std::memcmp(side[0].into.data(), side[1].into.data(), side[0].into.size()) == 0;
    if (!(o[0] == o[1]) || !same_bytes) {
      ++wrong;
      std::fprintf(stderr,
                   "%s, %s: cmt %zu, eof %d, error %d, errno %d, ftell %ld, fd at %lld; libc %zu, "
                   "%d, %d, %d, %ld, %lld%s\n",
                   sc.name, step.what, o[0].got, o[0].eof, o[0].error, o[0].err_no, o[0].tell,
                   static_cast<long long>(o[0].fd_at), o[1].got, o[1].eof, o[1].error, o[1].err_no,
                   o[1].tell, static_cast<long long>(o[1].fd_at),
                   same_bytes ? "" : "; the bytes differ");
    }
  }
  for (Side& s : side) std::fclose(s.fp);
  return wrong;
}

// Appends `n` bytes to the file: it grows after the streams met its end.
void append(const std::string& path, std::size_t n) {
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND);
  std::vector<unsigned char> more(n);
  for (std::size_t i = 0; i < n; ++i) more[i] = static_cast<unsigned char>(i * 7 + 3);
  if (fd < 0 || write(fd, more.data(), n) != static_cast<ssize_t>(n)) std::abort();
  close(fd);
}

std::vector<Scenario> scenarios() {
  auto small = [](std::size_t n) {
    return [n](Side& s) {
      std::vector<unsigned char> b(n);
      s.fread(b.data(), 1, n, s.fp);
    };
  };
  return {
      {"fresh stream", "r", -1, 0, nullptr, nullptr, 1, kMiB + 100},
      {"bytes in the buffer", "r", -1, 0, small(1000), nullptr, 1, 3 * kMiB + 1},
      {"elements of 12 bytes", "r", -1, 0, small(10), nullptr, 12, 100003},
      {"whole blocks", "r", -1, 0, nullptr, nullptr, 4096, 300},
      {"after ungetc of another byte", "r", -1, 0,
       [](Side& s) {
         std::fgetc(s.fp);
         std::ungetc('Z', s.fp);
       },
       nullptr, 1, 2 * kMiB + 9},
      {"unbuffered", "r", _IONBF, 0, nullptr, nullptr, 1, kMiB + 100},
      {"a buffer of 100 bytes", "r", _IOFBF, 100, small(10), nullptr, 1, kMiB + 100},
      {"a buffer of 1 MiB + 7", "r", _IOFBF, kMiB + 7, small(10), nullptr, 1, 3 * kMiB + 10},
      {"line buffered", "r", _IOLBF, 4096, nullptr, nullptr, 1, kMiB + 100},
      {"mapped (rm), first read", "rm", -1, 0, nullptr, nullptr, 1, kMiB + 100},
      {"mapped (rm), after a small read", "rm", -1, 0, small(100), nullptr, 1, kMiB + 100},
      {"no cancellation (rc)", "rc", -1, 0, nullptr, nullptr, 1, kMiB + 100},
      {"read-write, after a write and fseek", "r+", -1, 0,
       [](Side& s) {
         std::vector<unsigned char> same(5000, 0x3C);
         std::fwrite(same.data(), 1, same.size(), s.fp);
         std::fseek(s.fp, 0, SEEK_CUR);
       },
       nullptr, 1, kMiB + 100},
      {"append and read (a+), from the start", "a+", -1, 0, nullptr, nullptr, 1, kMiB + 100},
      {"append and read (a+), after an append and rewind", "a+", -1, 0,
       [](Side& s) {
         std::fputs("0123456789", s.fp);  // both streams append before either reads on
         std::rewind(s.fp);
       },
       nullptr, 1, 2 * kMiB + 3},
      {"at the end of the file", "r", -1, 0,
       [](Side& s) {
         std::fseek(s.fp, 0, SEEK_END);
         std::fgetc(s.fp);
       },
       nullptr, 1, kMiB + 100},
      {"the file grown after its end was met", "r", -1, 0,
       [](Side& s) {
         std::fseek(s.fp, 0, SEEK_END);
         std::fgetc(s.fp);
       },
       [](const std::string& path) { append(path, 3 * kMiB + 77); }, 1, kMiB + 100},
  };
}

// A stream locked by another thread, its caller doing its own locking: glibc's fread goes ahead
// without the lock; an fread that waited for it would wait here until the other thread gives up
// (after 3 s). Returns 1 if the large fread waited.
long bycaller_wrong(const std::string& path) {
  FILE* fp = std::fopen(path.c_str(), "r");
  if (!fp) return 1;
  __fsetlocking(fp, FSETLOCKING_BYCALLER);
  std::atomic<bool> locked{false}, done{false};
  std::thread holder([&] {
    flockfile(fp);
    locked = true;
    for (int i = 0; i < 300 && !done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    funlockfile(fp);
  });
  while (!locked) std::this_thread::yield();
  std::vector<unsigned char> into(2 * kMiB);
  const auto start = std::chrono::steady_clock::now();
  const std::size_t got = std::fread(into.data(), 1, into.size(), fp);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  done = true;
  holder.join();
  std::fclose(fp);
  ++g_steps;
  if (got == into.size() && took < 1.0) return 0;
  std::fprintf(stderr, "a stream locked by its caller: fread of %zu took %.2f s, got %zu\n",
               into.size(), took, got);
  return 1;
}

}  // namespace

int main() {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  g_libc_fread = libc ? reinterpret_cast<FreadFn>(dlsym(libc, "fread")) : nullptr;
  if (!g_libc_fread) return 2;
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS) return 77;
  if (cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS)
    return 2;
  void* pinned = nullptr;  // cmt's engine loads with the program's first copy or allocation
  if (cuMemAllocHost(&pinned, 4096) != CUDA_SUCCESS) return 2;
  long wrong = 0, count = 0;
  for (const Scenario& sc : scenarios()) {
    char name[] = "/tmp/cmt-fread-states-XXXXXX";
    const int w = mkstemp(name);
    std::vector<unsigned char> bytes(kFileSize);
    for (std::size_t i = 0; i < kFileSize; ++i) bytes[i] = static_cast<unsigned char>(i * 131 + 17);
    if (w < 0 || write(w, bytes.data(), kFileSize) != static_cast<ssize_t>(kFileSize)) return 2;
    close(w);
    wrong += scenario_wrong(sc, name);
    if (sc.name == std::string("fresh stream")) wrong += bycaller_wrong(name);
    unlink(name);
    ++count;
  }
  std::printf("scenarios %ld steps %ld wrong %ld\n", count, g_steps, wrong);
  return wrong == 0 ? 0 : 1;
}
