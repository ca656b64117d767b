// cmt-bench-processes: copies from several processes at once on one GPU, as a machine runs them
// when several programs share it (inference workers, a sweep's trials, test runners). Each
// process under cmt has copy threads of its own and none knows of the others', so what one
// process measures alone says little about P of them: together they share the cores, the
// memory's bandwidth and the link.
//
// The parent forks P children (it never touches CUDA itself: a child of a process that did may
// not use it) and waits; every child makes its own buffers and stream on the GPU and then runs
// the same windows as the others, in step, on a process-shared barrier: for each round the three
// modes in rotating order, default (CUDA's own path: the copying thread opted out of cmt), cmt
// (the same calls through libcmt.so) and pinned (cudaMallocHost buffers: the link's ceiling).
// In a window each child copies back to back (cudaMemcpyAsync on its own stream, then
// cudaStreamSynchronize) for a set time and records its window on the monotonic clock, which all
// processes share, and its process's CPU time over it (its copying thread and, under cmt, cmt's
// copy threads). The aggregate is all children's bytes over the span from the first start to the
// last end. Every child checks the bytes its last copy left after each window.
//
// usage: cmt-bench-processes --help (cmt bench copy --processes ... runs it)
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_pattern.h"
#include "bench_process.h"
#include "common/byte_size.h"
#include "common/output_file.h"

namespace {

using ForwardFn = int (*)(int);
using cmt::bench::median;
using cmt::bench::process_cpu_seconds;

const char* kModes[] = {"default", "cmt", "pinned"};

struct Options {
  std::vector<unsigned> processes = {1, 2, 4, 8};
  std::vector<std::size_t> sizes = {64u << 20};
  std::vector<std::string> patterns = {"h2d", "d2h", "both"};
  double seconds = 1;
  int rounds = 3;
  int device = 0;
  std::string json;
};

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "cmt-bench-processes: %s\n", why.c_str());
  std::exit(1);
}

double monotonic_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int parse(int argc, char** argv, Options* o) {
  CLI::App app{
      "Copies from several processes at once on one GPU, each direction alone and both: "
      "default vs cmt vs pinned, in step on a barrier, bytes checked",
      "cmt-bench-processes"};
  app.add_option("--processes", o->processes,
                 "Process counts measured one after another (both ways: half the processes each "
                 "way)")
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cmt::bench::add_sizes(app, "--sizes", &o->sizes, "Copy sizes");
  app.add_option("--patterns", o->patterns, "h2d, d2h and/or both (half the processes each way)")
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::IsMember({"h2d", "d2h", "both"}));
  app.add_option("--seconds", o->seconds, "Each timed window")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 600.0));
  app.add_option("--rounds", o->rounds, "Windows per mode")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--device", o->device, "The GPU (CUDA ordinal)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("--json", o->json, "Write the results as JSON");
  return cmt::bench::parse_command_line(app, argc, argv);
}

// One child's part of one window, written by the child into memory the parent shares.
struct Slot {
  double start = 0, end = 0;  // monotonic seconds
  double cpu_s = 0;           // the child's process's CPU seconds over its window
  std::uint64_t bytes = 0;
  int h2d = 1;
  int right = 0;  // 1: the last copy's bytes were checked right
};

// What the parent and one group of children share: their barrier, and a slot per child for each
// window (round, mode), written before the window's closing barrier.
struct Shared {
  pthread_barrier_t barrier;
  char gpu[256];
};

// The slots follow the Shared block: [(round * 3 + mode) * processes + child].
Slot* slots_of(Shared* s) {
  return reinterpret_cast<Slot*>(s + 1);
}

Shared* map_shared(unsigned processes, int rounds, std::size_t* length) {
  static_assert(sizeof(Shared) % alignof(Slot) == 0, "slots follow the shared block");
  *length = sizeof(Shared) + sizeof(Slot) * processes * 3 * static_cast<std::size_t>(rounds);
  void* p = mmap(nullptr, *length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("cannot map memory shared with the children");
  auto* s = static_cast<Shared*>(p);
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&s->barrier, &attr, processes);
  pthread_barrierattr_destroy(&attr);
  return s;
}

// A CUDA call in a child: on failure the child says which and exits 1 (the parent then stops
// the others, which would wait on the barrier for it).
#define CHILD_CUDA(call)                                                         \
  do {                                                                           \
    const cudaError_t err_ = (call);                                             \
    if (err_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "cmt-bench-processes: child %u: %s: %s\n", me, #call, \
                   cudaGetErrorString(err_));                                    \
      std::fflush(stderr);                                                       \
      _exit(1);                                                                  \
    }                                                                            \
  } while (0)

// One child's windows: each round's three modes in the order every child follows.
void child(const Options& o, Shared* sh, unsigned me, unsigned processes, std::size_t bytes,
           const std::string& pattern, ForwardFn forward) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    if (me == 0) std::fprintf(stderr, "cmt-bench-processes: no CUDA GPU found\n");
    _exit(1);
  }
  if (o.device >= devices) {
    if (me == 0)
      std::fprintf(stderr, "cmt-bench-processes: GPU %d out of range (this machine has %d)\n",
                   o.device, devices);
    _exit(1);
  }
  CHILD_CUDA(cudaSetDevice(o.device));
  if (me == 0) {
    cudaDeviceProp prop{};
    CHILD_CUDA(cudaGetDeviceProperties(&prop, o.device));
    std::snprintf(sh->gpu, sizeof(sh->gpu), "%s", prop.name);
  }
  // Separate pageable buffers for default and cmt: with hot buffers on, cmt registers what it
  // copies again and again, and CUDA would then take the default mode's copies as pinned ones.
  auto* pageable = static_cast<unsigned char*>(std::malloc(bytes));
  auto* pageable_cmt = static_cast<unsigned char*>(std::malloc(bytes));
  if (!pageable || !pageable_cmt) {
    std::fprintf(stderr, "cmt-bench-processes: child %u: out of host memory\n", me);
    _exit(1);
  }
  std::memset(pageable, 0, bytes);  // resident: page faults are another benchmark's
  std::memset(pageable_cmt, 0, bytes);
  unsigned char* pinned = nullptr;
  void* dev = nullptr;
  cudaStream_t stream = nullptr;
  CHILD_CUDA(cudaMallocHost(&pinned, bytes));
  CHILD_CUDA(cudaMalloc(&dev, bytes));
  CHILD_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const bool h2d = pattern == "h2d" || (pattern == "both" && me % 2 == 0);
  const cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  for (int round = 0; round < o.rounds; ++round)
    for (int k = 0; k < 3; ++k) {
      const int mode = (k + round) % 3;
      unsigned char* host = mode == 2 ? pinned : mode == 1 ? pageable_cmt : pageable;
      const std::uint64_t seed = (static_cast<std::uint64_t>(round) * 3 + mode) * 977 + me + 1;
      // Known contents on the source side, zeros on the destination side.
      if (h2d) {
        cmt::bench::write_pattern(host, bytes, seed);
        CHILD_CUDA(cudaMemsetAsync(dev, 0, bytes, stream));
      } else {
        cmt::bench::write_pattern(pinned, bytes, seed);
        CHILD_CUDA(cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, stream));
      }
      CHILD_CUDA(cudaStreamSynchronize(stream));
      if (!h2d) std::memset(host, 0, bytes);
      forward(mode == 0 ? 1 : 0);
      pthread_barrier_wait(&sh->barrier);
      Slot s;
      s.h2d = h2d;
      s.start = monotonic_seconds();
      const double cpu0 = process_cpu_seconds();
      double now = s.start;
      do {
        CHILD_CUDA(cudaMemcpyAsync(h2d ? dev : static_cast<void*>(host),
                                   h2d ? static_cast<const void*>(host) : dev, bytes, kind,
                                   stream));
        CHILD_CUDA(cudaStreamSynchronize(stream));
        s.bytes += bytes;
        now = monotonic_seconds();
      } while (now - s.start < o.seconds);
      s.end = now;
      s.cpu_s = process_cpu_seconds() - cpu0;
      forward(0);
      if (h2d) {
        CHILD_CUDA(cudaMemcpy(pinned, dev, bytes, cudaMemcpyDeviceToHost));
        s.right = cmt::bench::has_pattern(pinned, bytes, seed);
      } else {
        s.right = cmt::bench::has_pattern(host, bytes, seed);
      }
      slots_of(sh)[(round * 3 + mode) * processes + me] = s;
      // Nobody prepares the next window while another still copies in this one.
      pthread_barrier_wait(&sh->barrier);
    }
  std::fflush(stdout);
  _exit(0);  // no atexit work of the parent's copy of the program (and CUDA's own teardown)
}

// Waits for every child; if one fails, stops the others (they would wait for it on the barrier).
bool wait_children(const std::vector<pid_t>& pids) {
  bool ok = true;
  for (std::size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) return false;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (ok)
        for (pid_t other : pids) kill(other, SIGKILL);
      ok = false;
    }
  }
  return ok;
}

struct Cell {
  unsigned processes = 1;
  std::size_t bytes = 0;
  std::string pattern;
  std::string gpu;
  std::vector<double> total[3], h2d[3], d2h[3], cpu_s_per_gb[3], slowest[3], fastest[3];
  long wrong = 0;
};

// One window's figures from its slots.
void add_window(Cell* cell, int mode, const Slot* slots, unsigned processes) {
  double first = 1e300, last = 0, moved = 0, cpu = 0, up = 0, down = 0;
  double slowest = 1e300, fastest = 0;
  for (unsigned c = 0; c < processes; ++c) {
    const Slot& s = slots[c];
    first = std::min(first, s.start);
    last = std::max(last, s.end);
    moved += static_cast<double>(s.bytes);
    (s.h2d ? up : down) += static_cast<double>(s.bytes);
    cpu += s.cpu_s;
    const double own = s.end > s.start ? static_cast<double>(s.bytes) / (s.end - s.start) / 1e9 : 0;
    slowest = std::min(slowest, own);
    fastest = std::max(fastest, own);
    if (!s.right) ++cell->wrong;
  }
  const double span = last > first ? last - first : 1e-9;
  cell->total[mode].push_back(moved / span / 1e9);
  cell->h2d[mode].push_back(up / span / 1e9);
  cell->d2h[mode].push_back(down / span / 1e9);
  cell->cpu_s_per_gb[mode].push_back(moved > 0 ? cpu / (moved / 1e9) : 0);
  cell->slowest[mode].push_back(slowest);
  cell->fastest[mode].push_back(fastest);
}

// One cell: P children, o.rounds windows of each mode.
Cell measure_cell(const Options& o, unsigned processes, std::size_t bytes,
                  const std::string& pattern, ForwardFn forward) {
  std::size_t length = 0;
  Shared* sh = map_shared(processes, o.rounds, &length);
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (unsigned me = 0; me < processes; ++me) {
    const pid_t pid = fork();
    if (pid < 0) {
      for (pid_t other : pids) kill(other, SIGKILL);
      fail("cannot fork child " + std::to_string(me));
    }
    if (pid == 0) child(o, sh, me, processes, bytes, pattern, forward);
    pids.push_back(pid);
  }
  if (!wait_children(pids)) fail("a child failed (the reason is above)");
  Cell cell;
  cell.processes = processes;
  cell.bytes = bytes;
  cell.pattern = pattern;
  cell.gpu = sh->gpu;
  for (int round = 0; round < o.rounds; ++round)
    for (int mode = 0; mode < 3; ++mode)
      add_window(&cell, mode, &slots_of(sh)[(round * 3 + mode) * processes], processes);
  pthread_barrier_destroy(&sh->barrier);
  munmap(sh, length);
  return cell;
}

double lowest(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}
double highest(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}

void print_cell(const Cell& c) {
  std::printf("%u process%s x %s, %s:\n", c.processes, c.processes > 1 ? "es" : "",
              cmt::format_byte_size(c.bytes).c_str(), c.pattern.c_str());
  for (int m = 0; m < 3; ++m) {
    std::printf("  %-7s %6.1f GB/s [%5.1f-%5.1f]", kModes[m], median(c.total[m]),
                lowest(c.total[m]), highest(c.total[m]));
    if (c.pattern == "both")
      std::printf(" (h2d %.1f + d2h %.1f)", median(c.h2d[m]), median(c.d2h[m]));
    std::printf("  a process %.1f-%.1f GB/s, cpu %.3f s/GB\n", median(c.slowest[m]),
                median(c.fastest[m]), median(c.cpu_s_per_gb[m]));
  }
  std::printf("  cmt/default %.2fx, cmt/pinned %.2f\n", median(c.total[1]) / median(c.total[0]),
              median(c.total[1]) / median(c.total[2]));
  std::fflush(stdout);
}

void write_json(const Options& o, const std::string& date, const std::vector<Cell>& cells,
                long wrong, int argc, char** argv) {
  cmt::OutputFile out(o.json);
  std::FILE* f = out.stream();
  if (!f) fail("cannot write " + o.json + ": " + out.why());
  std::string cmdline;
  for (int i = 0; i < argc; ++i) cmdline += std::string(i ? " " : "") + argv[i];
  std::fprintf(f,
               "{\n  \"benchmark\": \"cmt-bench-processes\",\n  \"cmt_version\": \"%s\",\n  "
               "\"date\": \"%s\",\n  \"command\": \"%s\",\n  \"gpu\": \"%s\",\n  \"cpus\": %u,\n  "
               "\"seconds\": %.2f,\n  \"rounds\": %d,\n  \"aggregate\": \"all processes' bytes "
               "over the span from the first start to the last end\",\n  \"cpu\": \"the "
               "processes' CPU seconds over their windows, per GB moved\",\n  "
               "\"wrong_windows\": %ld,\n  \"results\": [\n",
               CMT_VERSION, date.c_str(), cmdline.c_str(),
               cells.empty() ? "" : cells[0].gpu.c_str(), std::thread::hardware_concurrency(),
               o.seconds, o.rounds, wrong);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    std::fprintf(f, "    {\"processes\": %u, \"bytes\": %zu, \"pattern\": \"%s\"", c.processes,
                 c.bytes, c.pattern.c_str());
    for (int m = 0; m < 3; ++m)
      std::fprintf(f,
                   ", \"%s\": {\"total_gbps\": %.3f, \"min_gbps\": %.3f, \"max_gbps\": %.3f, "
                   "\"h2d_gbps\": %.3f, \"d2h_gbps\": %.3f, \"slowest_process_gbps\": %.3f, "
                   "\"fastest_process_gbps\": %.3f, \"cpu_s_per_gb\": %.4f}",
                   kModes[m], median(c.total[m]), lowest(c.total[m]), highest(c.total[m]),
                   median(c.h2d[m]), median(c.d2h[m]), median(c.slowest[m]), median(c.fastest[m]),
                   median(c.cpu_s_per_gb[m]));
    std::fprintf(f, ", \"cmt_over_default\": %.3f, \"cmt_over_pinned\": %.3f}%s\n",
                 median(c.total[1]) / median(c.total[0]), median(c.total[1]) / median(c.total[2]),
                 i + 1 < cells.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  if (!out.commit()) fail("cannot write " + o.json + ": " + out.why());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int status = parse(argc, argv, &o); status >= 0) return status;
  // Both ways needs a process each way: a count under 2 is skipped there, unless it is all.
  const bool some_pair =
      std::any_of(o.processes.begin(), o.processes.end(), [](unsigned n) { return n >= 2; });
  if (!some_pair && std::find(o.patterns.begin(), o.patterns.end(), "both") != o.patterns.end()) {
    std::fprintf(stderr,
                 "cmt-bench-processes: pattern both needs 2 processes or more (half each way); "
                 "--processes has only 1\n");
    return 2;
  }
  cmt::bench::ensure_preloaded(argv);
  auto forward = reinterpret_cast<ForwardFn>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread"));
  if (!forward) fail("libcmt.so has no cmt_forward_this_thread");
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf(
      "cmt-bench-processes  %s  %u CPUs  GPU %d  processes %s  %g s windows, %d rounds\n", date,
      std::thread::hardware_concurrency(), o.device,
      [&] {
        std::string t;
        for (unsigned n : o.processes) t += (t.empty() ? "" : ",") + std::to_string(n);
        return t;
      }()
          .c_str(),
      o.seconds, o.rounds);
  std::vector<Cell> cells;
  long wrong = 0;
  for (std::size_t bytes : o.sizes)
    for (const std::string& pattern : o.patterns)
      for (unsigned n : o.processes) {
        if (pattern == "both" && n < 2) continue;  // no process for the other way
        cells.push_back(measure_cell(o, n, bytes, pattern, forward));
        if (cells.size() == 1) std::printf("GPU: %s\n", cells[0].gpu.c_str());
        print_cell(cells.back());
        wrong += cells.back().wrong;
      }
  if (wrong) std::printf("WRONG BYTES in %ld windows\n", wrong);
  if (!o.json.empty()) write_json(o, date, cells, wrong, argc, argv);
  return wrong ? 1 : 0;
}
