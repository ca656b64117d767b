// cmt under load, on a GPU, every byte checked; run with libcmt.so preloaded (gpu_stress.sh).
//
//   stress SECONDS THREADS   THREADS application threads, each with two streams of its own,
//                            round trips of random sizes from 1 B to 1 GiB (log-uniform), odd
//                            offsets, cudaMemcpy or cudaMemcpyAsync on either stream or the NULL
//                            stream, until the time is up.
//   differential COPIES      random copies, each made once through cmt and once through CUDA's
//                            own path (this thread opted out with cmt_forward_this_thread), with
//                            the same arguments, valid or not (wrong kinds, ranges past a device
//                            allocation, null pointers): the return codes, the runtime's last
//                            error after the call and every byte of the results must agree.
//   fork                     after cmt has taken copies, a forked child makes a pageable copy: it
//                            must end promptly with the same return code as a child of the same
//                            process whose copies CUDA alone makes (CUDA cannot be used after a
//                            fork; cmt must not hang there either).
//   capture                  copies on a stream capturing a CUDA graph, in each capture mode,
//                            while another thread makes cmt's first copy (which allocates staging
//                            memory): every call returns what it returns without cmt, and the
//                            captures end as they do without cmt.
//
// Prints one JSON line of counts. Exit status: 0 every byte and code right, 1 not, 77 no GPU.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<long> g_copies{0}, g_bytes{0}, g_wrong{0}, g_errors{0};

void fail(const char* what, long detail) {
  std::fprintf(stderr, "FAIL: %s (%ld)\n", what, detail);
  g_wrong.fetch_add(1);
}

#define EXPECT_CUDA(call)                                                  \
  do {                                                                     \
    const cudaError_t e_ = (call);                                         \
    if (e_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(e_));                                \
      g_errors.fetch_add(1);                                               \
      return;                                                              \
    }                                                                      \
  } while (0)

using ForwardFn = int (*)(int);
ForwardFn forward_this_thread() {
  static ForwardFn fn = reinterpret_cast<ForwardFn>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread"));
  return fn;
}

void fill(unsigned char* p, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(p + i, &v, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<unsigned char>(rng());
}

// Log-uniform from 1 byte to `largest`.
std::size_t random_size(std::mt19937_64& rng, std::size_t largest) {
  std::uniform_real_distribution<double> exponent(0, std::log2(static_cast<double>(largest)));
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::exp2(exponent(rng))));
}

// ---- stress ----------------------------------------------------------------------------------

void stress_thread(int id, double seconds, std::size_t largest) {
  std::mt19937_64 rng(1000 + id);
  const std::size_t room = largest + 64;
  std::vector<unsigned char> src(room), back(room), expect;
  unsigned char* dev = nullptr;
  EXPECT_CUDA(cudaMalloc(&dev, room));
  cudaStream_t streams[2];
  for (auto& s : streams) EXPECT_CUDA(cudaStreamCreate(&s));
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    const std::size_t bytes = random_size(rng, largest);
    const std::size_t src_off = rng() % 64, dev_off = rng() % 64, back_off = rng() % 64;
    fill(src.data() + src_off, bytes, rng());
    expect.assign(src.begin() + src_off, src.begin() + src_off + bytes);
    const int how = static_cast<int>(rng() % 4);  // sync, async stream 0/1, async NULL stream
    cudaStream_t s = how == 3 ? nullptr : streams[how % 2];
    if (how == 0) {
      EXPECT_CUDA(cudaMemcpy(dev + dev_off, src.data() + src_off, bytes, cudaMemcpyHostToDevice));
      // H2D returns once the source is staged: overwrite it at once.
      std::memset(src.data() + src_off, 0xEE, bytes);
      EXPECT_CUDA(cudaMemcpy(back.data() + back_off, dev + dev_off, bytes, cudaMemcpyDeviceToHost));
    } else {
      EXPECT_CUDA(
          cudaMemcpyAsync(dev + dev_off, src.data() + src_off, bytes, cudaMemcpyHostToDevice, s));
      std::memset(src.data() + src_off, 0xEE, bytes);
      EXPECT_CUDA(cudaMemcpyAsync(back.data() + back_off, dev + dev_off, bytes,
                                  rng() % 2 ? cudaMemcpyDeviceToHost : cudaMemcpyDefault, s));
      EXPECT_CUDA(cudaStreamSynchronize(s));
    }
    if (std::memcmp(back.data() + back_off, expect.data(), bytes) != 0)
      fail("stress: wrong bytes after a round trip", static_cast<long>(bytes));
    g_copies.fetch_add(2);
    g_bytes.fetch_add(2 * static_cast<long>(bytes));
  }
  for (auto& s : streams) cudaStreamDestroy(s);
  cudaFree(dev);
}

void run_stress(double seconds, int threads) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    // Most threads up to 64 MiB, four of them up to 1 GiB: 16 threads of 1 GiB buffers would
    // ask for 48 GiB of pageable memory.
    pool.emplace_back(stress_thread, t, seconds, t % 4 == 0 ? (1u << 30) : (64u << 20));
  for (auto& t : pool) t.join();
}

// ---- differential ------------------------------------------------------------------------------

struct Outcome {
  cudaError_t code, last;  // last: cudaGetLastError() right after the copy call
  std::vector<unsigned char> host, device;
};

// One copy as case `seed` says, through cmt (forward = 0) or CUDA alone (forward = 1), from the
// same starting bytes in both buffers; returns the code and both buffers after.
void one_case(std::uint64_t seed, int forward, Outcome* out) {
  std::mt19937_64 rng(seed);
  const std::size_t bytes = random_size(rng, 96u << 20);
  const std::size_t host_off = rng() % 4096, dev_off = rng() % 4096;
  const int kind_pick = static_cast<int>(rng() % 16);
  const bool async = rng() % 2;
  const bool past_end = rng() % 16 == 0;  // the device range leaves its allocation
  const bool null_host = rng() % 32 == 0;
  const bool h2d = kind_pick < 7;
  const cudaMemcpyKind kind = kind_pick < 6    ? cudaMemcpyHostToDevice
                              : kind_pick < 7  ? cudaMemcpyDefault
                              : kind_pick < 13 ? cudaMemcpyDeviceToHost
                              : kind_pick < 14 ? cudaMemcpyDefault
                              : kind_pick < 15 ? cudaMemcpyHostToHost
                                               : static_cast<cudaMemcpyKind>(7);  // invalid
  const std::size_t dev_room = dev_off + (past_end ? bytes / 2 : bytes) + 64;
  std::vector<unsigned char> host(host_off + bytes + 64), init(dev_room);
  fill(host.data(), host.size(), seed ^ 0x55);
  fill(init.data(), init.size(), seed ^ 0xAA);
  unsigned char* dev = nullptr;
  out->last = cudaSuccess;
  out->code = cudaMalloc(&dev, dev_room);
  if (out->code != cudaSuccess) return;
  const int was = forward_this_thread()(1);  // the set-up is CUDA's own, on both paths
  cudaMemcpy(dev, init.data(), dev_room, cudaMemcpyHostToDevice);
  forward_this_thread()(forward);
  unsigned char* d = dev + dev_off;
  unsigned char* h = null_host ? nullptr : host.data() + host_off;
  const cudaError_t code =
      h2d ? (async ? cudaMemcpyAsync(d, h, bytes, kind, nullptr) : cudaMemcpy(d, h, bytes, kind))
          : (async ? cudaMemcpyAsync(h, d, bytes, kind, nullptr) : cudaMemcpy(h, d, bytes, kind));
  // The runtime's last error as the program sees it next: set by a failed copy, and left alone by
  // one that succeeds (cmt's own work must not leave an error of its there).
  out->last = cudaGetLastError();
  forward_this_thread()(1);
  const cudaError_t sync = cudaDeviceSynchronize();
  (void)cudaGetLastError();  // the synchronize's, compared through the codes
  out->code = code != cudaSuccess ? code : sync;
  out->host = std::move(host);
  out->device.resize(dev_room);
  cudaMemcpy(out->device.data(), dev, dev_room, cudaMemcpyDeviceToHost);
  cudaFree(dev);
  forward_this_thread()(was);
}

void run_differential(long copies) {
  Outcome a, b;
  long errors_both = 0;
  for (long i = 0; i < copies; ++i) {
    const std::uint64_t seed = 0x5EED0000 + static_cast<std::uint64_t>(i);
    one_case(seed, 0, &a);
    one_case(seed, 1, &b);
    if (a.code != b.code) fail("differential: return codes differ", i);
    if (a.last != b.last) fail("differential: cudaGetLastError differs", i);
    if (a.host != b.host) fail("differential: host bytes differ", i);
    if (a.device != b.device) fail("differential: device bytes differ", i);
    if (a.code != cudaSuccess) ++errors_both;
    g_copies.fetch_add(2);
  }
  std::fprintf(stderr, "differential: %ld cases, %ld of them errors (the same) on both paths\n",
               copies, errors_both);
}

// ---- capture -----------------------------------------------------------------------------------

struct CaptureResult {
  cudaError_t begin, copy, end, replay, other_up = cudaSuccess, other_down = cudaSuccess;
  bool bytes_ok;
};

// Captures a pageable H2D copy and a D2H copy on `s` in `mode`, while (optionally) another thread
// makes a large pageable copy of its own at the same time; then replays the graph.
CaptureResult capture_once(cudaStreamCaptureMode mode, int forward, bool other_thread) {
  CaptureResult r{};
  const std::size_t bytes = 8u << 20;
  std::vector<unsigned char> src(bytes), back(bytes, 0), other(64u << 20, 3), other_back(64u << 20);
  fill(src.data(), bytes, 7);
  unsigned char *dev = nullptr, *dev2 = nullptr;
  cudaMalloc(&dev, bytes);
  cudaMalloc(&dev2, other.size());
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  const int was = forward_this_thread()(forward);
  r.begin = cudaStreamBeginCapture(s, mode);
  std::thread t;
  if (other_thread)
    t = std::thread([&] {
      forward_this_thread()(forward);
      r.other_up = cudaMemcpy(dev2, other.data(), other.size(), cudaMemcpyHostToDevice);
      r.other_down = cudaMemcpy(other_back.data(), dev2, other.size(), cudaMemcpyDeviceToHost);
    });
  r.copy = cudaMemcpyAsync(dev, src.data(), bytes, cudaMemcpyHostToDevice, s);
  if (r.copy == cudaSuccess)
    r.copy = cudaMemcpyAsync(back.data(), dev, bytes, cudaMemcpyDeviceToHost, s);
  if (t.joinable()) t.join();
  cudaGraph_t graph = nullptr;
  r.end = cudaStreamEndCapture(s, &graph);
  r.replay = cudaErrorUnknown;
  if (r.end == cudaSuccess && graph) {
    cudaGraphExec_t exec = nullptr;
    r.replay = cudaGraphInstantiate(&exec, graph, 0);
    if (r.replay == cudaSuccess) r.replay = cudaGraphLaunch(exec, s);
    if (r.replay == cudaSuccess) r.replay = cudaStreamSynchronize(s);
    if (exec) cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  forward_this_thread()(was);
  (void)cudaGetLastError();
  r.bytes_ok = r.replay != cudaSuccess || std::memcmp(back.data(), src.data(), bytes) == 0;
  cudaStreamDestroy(s);
  cudaFree(dev);
  cudaFree(dev2);
  return r;
}

void run_capture() {
  const cudaStreamCaptureMode modes[] = {
      cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed};
  const char* names[] = {"global", "thread-local", "relaxed"};
  for (int m = 0; m < 3; ++m)
    for (bool other : {false, true}) {
      CaptureResult with = capture_once(modes[m], 0, other);
      CaptureResult without = capture_once(modes[m], 1, other);
      std::fprintf(stderr,
                   "capture %s%s: cmt begin %d copy %d end %d replay %d other %d %d; CUDA alone "
                   "%d %d %d %d other %d %d\n",
                   names[m], other ? " with another thread copying" : "", with.begin, with.copy,
                   with.end, with.replay, with.other_up, with.other_down, without.begin,
                   without.copy, without.end, without.replay, without.other_up, without.other_down);
      if (with.begin != without.begin || with.copy != without.copy || with.end != without.end ||
          with.replay != without.replay || with.other_up != without.other_up ||
          with.other_down != without.other_down)
        fail("capture: a call returned something else under cmt", m);
      if (!with.bytes_ok || !without.bytes_ok)
        fail("capture: the replayed graph copied wrong bytes", m);
      g_copies.fetch_add(4);
    }
}

// ---- fork --------------------------------------------------------------------------------------

// Forks; the child copies 64 MiB host to device and exits with the return code. Returns the
// child's code, or -1 if it did not end within 30 s (it is then killed).
int child_copy(unsigned char* dev, std::vector<unsigned char>& host) {
  const pid_t pid = fork();
  if (pid == 0) {
    const cudaError_t e = cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice);
    _exit(static_cast<int>(e) & 0xff);
  }
  for (int i = 0; i < 3000; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

void run_fork() {
  std::vector<unsigned char> host(64u << 20, 9), back(64u << 20);
  unsigned char* dev = nullptr;
  EXPECT_CUDA(cudaMalloc(&dev, host.size()));
  // cmt's engine runs in this process before the fork.
  EXPECT_CUDA(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice));
  EXPECT_CUDA(cudaMemcpy(back.data(), dev, host.size(), cudaMemcpyDeviceToHost));
  if (back != host) fail("fork: wrong bytes before the fork", 0);
  const int with = child_copy(dev, host);
  const int was = forward_this_thread()(1);  // the child inherits this thread's opt-out
  const int without = child_copy(dev, host);
  forward_this_thread()(was);
  std::fprintf(stderr, "fork: a child's pageable copy returned %d under cmt, %d with CUDA alone\n",
               with, without);
  if (with == -1) fail("fork: the child hung under cmt", with);
  if (with != without) fail("fork: the child's copy returned something else under cmt", with);
  g_copies.fetch_add(4);
  cudaFree(dev);
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA GPU found\n");
    return 77;
  }
  if (!forward_this_thread()) {
    std::fprintf(stderr, "libcmt.so is not loaded (run under cmt run or LD_PRELOAD)\n");
    return 2;
  }
  const std::string mode = argc > 1 ? argv[1] : "";
  const auto t0 = std::chrono::steady_clock::now();
  if (mode == "stress" && argc > 3) {
    run_stress(std::atof(argv[2]), std::atoi(argv[3]));
  } else if (mode == "differential" && argc > 2) {
    run_differential(std::atol(argv[2]));
  } else if (mode == "capture") {
    run_capture();
  } else if (mode == "fork") {
    run_fork();
  } else {
    std::fprintf(
        stderr,
        "usage: gpu_stress stress SECONDS THREADS | differential COPIES | capture | fork\n");
    return 2;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "{\"mode\": \"%s\", \"seconds\": %.1f, \"copies\": %ld, \"bytes\": %ld, "
      "\"wrong\": %ld, \"cuda_errors\": %ld}\n",
      mode.c_str(), s, g_copies.load(), g_bytes.load(), g_wrong.load(), g_errors.load());
  return g_wrong.load() == 0 && g_errors.load() == 0 ? 0 : 1;
}
