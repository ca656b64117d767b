// cmt-bench-concurrent: copies from several host threads at once, each direction alone and both
// at once, by the method of host-to-gpu-bandwidth-8x4090.txt (the seeds): every thread has its own
// buffers and its own stream, all start on one barrier, copy back to back for a set time, and
// record their own window on the monotonic clock. A thread's rate is its bytes over its own
// window; the sum of the rates is reported only where the window all threads share covers at
// least 99% of every thread's own (else the threads did not copy at the same time, and the sum is
// no bandwidth anyone gets). The aggregate always reported is the conservative one: all threads'
// bytes over the span from the first start to the last end (each thread stops at the end of the
// copy in flight when time is up, so with long copies the windows cannot overlap by 99%).
//
// Three modes in one process, rounds rotating their order: default (CUDA's own path: every
// thread opted out of cmt), cmt (the same calls through libcmt.so), pinned (the same calls on
// cudaMallocHost buffers: the link's ceiling). Each copy is cudaMemcpyAsync on the thread's own
// non-blocking stream then cudaStreamSynchronize (--stream own), or cudaMemcpy on the legacy
// default stream (--stream null), where CUDA orders every thread's copies one after another.
// After each window every thread checks the bytes its last copy left. Beside each mode's rate (a
// window's mean copy) stand its median copy and the slowest first copy of a window, and the
// process's CPU time per GB moved, from the barrier's release to the end of the last thread's
// last copy: the copying threads' own (CUDA spins while it synchronizes, in every mode alike) and
// cmt's copy threads' (staging), which is what a user sees in `top`.
//
// The host's yardstick, the staging bound: memcpy between resident buffers on every CPU, in
// pieces claimed in turn (256 KiB and 4 MiB; the faster counts), and on one thread. A staged copy
// makes a CPU copy of every byte (pageable <-> pinned) besides the DMA's own pass over host
// memory, so staged copies together cannot pass the all-CPU memcpy rate; the DMA's pass puts
// the real limit lower, by up to a third.
//
// Several GPUs: --devices 0,1 runs the threads on each of them at once (--threads per GPU, each
// thread pinned to its GPU's local cores with its pageable buffer first touched there), and
// --sets "0;1;0,1" or --sets auto (`cmt bench topo`) measures set after set: each GPU alone, the
// GPUs behind each PCIe root port (a switch's uplink) together, those of each NUMA node, all of
// them. Each GPU's share is reported beside the total.
//
// usage: cmt-bench-concurrent --help (the plot is drawn from the JSON by bench/plot_concurrent.py)
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_pattern.h"
#include "bench_process.h"
#include "common/byte_size.h"
#include "common/output_file.h"
#include "cuda_check.h"
#include "engine/shared/gpu_locality.h"
#include "topology.h"

namespace {

using Clock = std::chrono::steady_clock;
using ForwardFn = int (*)(int);

constexpr double kOverlapNeeded = 0.99;
const char* kModes[] = {"default", "cmt", "pinned"};

struct Options {
  unsigned threads = 8;
  std::vector<std::size_t> sizes = {256u << 20};
  std::vector<std::string> patterns = {"h2d", "d2h", "both"};
  double seconds = 2;
  int rounds = 3;
  bool null_stream = false;
  std::vector<std::vector<int>> sets = {{0}};  // GPU sets measured one after another
  bool auto_sets = false;  // each GPU, each root port's GPUs, each NUMA node's, all
  std::string json, plot;
};

// A failure after the command line was read: says why and ends the program.
[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "cmt-bench-concurrent: %s\n", why.c_str());
  std::exit(1);
}

std::vector<std::string> split_on(const std::string& list, char sep) {
  std::vector<std::string> out;
  std::string item;
  for (char c : list + sep) {
    if (c != sep) {
      item += c;
    } else if (!item.empty()) {
      out.push_back(item);
      item.clear();
    }
  }
  return out;
}

// "0,1" (--devices) or "0;1;0,1" (--sets): GPU sets by CUDA ordinal, each listed once.
std::vector<std::vector<int>> parse_sets(const std::string& flag, const std::string& text) {
  std::vector<std::vector<int>> sets;
  for (const std::string& group :
       flag == "--sets" ? split_on(text, ';') : std::vector<std::string>{text}) {
    std::vector<int> set;
    for (const std::string& d : split_on(group, ',')) {
      char* end = nullptr;
      const long n = std::strtol(d.c_str(), &end, 10);
      if (!end || *end || n < 0 || n > 1024)
        throw CLI::ValidationError(flag,
                                   "bad GPU '" + d + "' in " + flag + " '" + text +
                                       "' (expected CUDA ordinals such as 0,1" +
                                       (flag == "--sets" ? "; sets split by ';', or auto)" : ")"));
      if (std::find(set.begin(), set.end(), n) == set.end()) set.push_back(static_cast<int>(n));
    }
    if (!set.empty()) sets.push_back(set);
  }
  if (sets.empty()) throw CLI::ValidationError(flag, "no GPU in " + flag + " '" + text + "'");
  return sets;
}

// The command line (cmt bench copy --threads and cmt bench topo pass theirs here untouched;
// topo adds --topo, whose defaults are its own). Returns -1 to go on, else the status to exit
// with.
int parse(int argc, char** argv, Options* o) {
  const bool topo = std::any_of(argv + 1, argv + argc,
                                [](const char* a) { return std::strcmp(a, "--topo") == 0; });
  if (topo) {
    o->threads = 2;
    o->seconds = 3;
    o->auto_sets = true;
  }
  CLI::App app{
      "Copies from several host threads at once, each direction alone and both: default "
      "vs cmt vs pinned, barrier start, per-thread windows",
      "cmt-bench-concurrent"};
  app.add_flag("--topo",
               "cmt bench topo: the GPU sets default to auto (each GPU, each PCIe root port's "
               "GPUs, each NUMA node's, all), 2 threads per GPU, 3 s windows");
  app.add_option("--threads", o->threads, "Host threads per GPU (both ways: half each way)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmt::bench::add_sizes(app, "--sizes", &o->sizes, "Copy sizes");
  app.add_option("--patterns", o->patterns, "h2d, d2h and/or both (half the threads each way)")
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::Validator(
          [](const std::string& p) {
            return p == "h2d" || p == "d2h" || p == "both"
                       ? std::string()
                       : "unknown pattern '" + p + "' (expected h2d, d2h or both)";
          },
          "h2d|d2h|both"));
  app.add_option("--seconds", o->seconds, "Each timed window")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--rounds", o->rounds, "Windows per mode")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  std::string stream = "own";
  app.add_option("--stream", stream,
                 "own (a stream per thread, cudaMemcpyAsync) or null (cudaMemcpy on the legacy "
                 "stream)")
      ->capture_default_str()
      ->check(CLI::IsMember({"own", "null"}));
  auto* device = app.add_option_function<int>(
                        "--device", [o](int d) { o->sets = {{d}}; }, "One GPU (CUDA ordinal)")
                     ->check(CLI::Range(0, 1024));
  auto* devices = app.add_option_function<std::string>(
      "--devices", [o](const std::string& v) { o->sets = parse_sets("--devices", v); },
      "GPUs copying at once, e.g. 0,1");
  app.add_option_function<std::string>(
         "--sets",
         [o](const std::string& v) {
           o->auto_sets = v == "auto";
           if (!o->auto_sets) o->sets = parse_sets("--sets", v);
         },
         "GPU sets measured one after another: \"0;1;0,1\" measures GPU 0, GPU 1, then both at "
         "once; auto: each GPU, each PCIe root port's GPUs, each NUMA node's, all")
      ->excludes(device)
      ->excludes(devices);
  device->excludes(devices);
  app.add_option("--json", o->json, "Write the results as JSON");
  app.add_option("--plot", o->plot, "Draw them as SVG (needs --json)");
  const int status = cmt::bench::parse_command_line(app, argc, argv);
  o->null_stream = stream == "null";
  if (status >= 0) return status;
  for (const std::string& p : o->patterns)
    if (p == "both" && o->threads < 2) {
      std::fprintf(
          stderr, "cmt-bench-concurrent: pattern both needs --threads 2 or more (half each way)\n");
      return 2;
    }
  if (!o->plot.empty() && o->json.empty()) {
    std::fprintf(stderr, "cmt-bench-concurrent: --plot needs --json (the plot is drawn from it)\n");
    return 2;
  }
  return -1;
}

using cmt::bench::has_pattern;
using cmt::bench::median;
using cmt::bench::process_cpu_seconds;
using cmt::bench::write_pattern;

struct Buffers {  // one thread's
  int device = 0;
  std::vector<int> cpus;  // the GPU's local cores, where the thread runs
  // The default mode's pageable buffer, and the cmt mode's own: with register = hot cmt registers
  // the buffers it copies again and again, and CUDA would then take the default mode's copies as
  // from pinned memory.
  unsigned char* pageable = nullptr;
  unsigned char* pageable_cmt = nullptr;
  unsigned char* pinned = nullptr;
  void* dev = nullptr;
  cudaStream_t stream = nullptr;
};

struct Window {  // one thread's part of one timed window
  bool h2d = true;
  double start = 0, end = 0;  // seconds from the barrier's release
  std::size_t bytes = 0;
  bool right = true;
  // Each copy's seconds, call to synchronize's return: the window's rate is their mean, and a
  // slow first copy (a thread made afresh for every window) or a tail shows beside the median.
  std::vector<double> copy_s;
  double gbps() const { return end > start ? static_cast<double>(bytes) / (end - start) / 1e9 : 0; }
};

// What one window of all threads gave.
struct Outcome {
  double h2d = 0, d2h = 0;      // all threads' bytes each way over the span of all windows
  std::vector<double> per_gpu;  // each GPU's threads' bytes over the same span, by set position
  double sum_of_rates = 0;      // the seeds' aggregate: meaningful only if overlap >= 0.99
  double overlap = 0;
  double cpu_s_per_gb = 0;  // the process's CPU seconds over the window, per GB all threads moved
  double copy_median_us = 0;  // the threads' median copy, median over the threads
  double first_copy_us = 0;   // the slowest thread's first copy
  bool right = true;
};

// The end of a window: the thread whose copies end last reads the process's CPU time, while the
// others wait asleep (a thread spinning for the last one would be counted).
class WindowEnd {
 public:
  explicit WindowEnd(std::size_t threads) : left_(threads) {}
  void arrive() {
    std::unique_lock<std::mutex> lk(m_);
    if (--left_ == 0) {
      cpu_end_ = process_cpu_seconds();
      cv_.notify_all();
    } else {
      cv_.wait(lk, [&] { return left_ == 0; });
    }
  }
  double cpu_end() const { return cpu_end_; }  // after every thread arrived

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::size_t left_;
  double cpu_end_ = 0;
};

class Bench {
 public:
  Bench(const Options& o, ForwardFn forward) : o_(o), forward_(forward) {}

  // Each thread's buffers for the GPUs of `set`, o_.threads per GPU, each made on a thread
  // pinned to that GPU's local cores, so that first touch puts the pageable one on its node.
  void allocate(std::size_t bytes, const std::vector<int>& set) {
    set_ = set;
    bufs_.assign(o_.threads * set.size(), Buffers{});
    for (std::size_t t = 0; t < bufs_.size(); ++t) {
      Buffers& b = bufs_[t];
      b.device = set[t / o_.threads];
      char pci[64] = {};
      CMT_CHECK_CUDA(cudaDeviceGetPCIBusId(pci, sizeof(pci), b.device));
      b.cpus = cmt::gpu_locality(pci).cpus;
      std::thread([&] {
        cmt::pin_current_thread(b.cpus);
        CMT_CHECK_CUDA(cudaSetDevice(b.device));
        b.pageable = static_cast<unsigned char*>(std::malloc(bytes));
        b.pageable_cmt = static_cast<unsigned char*>(std::malloc(bytes));
        if (!b.pageable || !b.pageable_cmt)
          fail("out of host memory for " + std::to_string(bufs_.size()) + " buffers");
        std::memset(b.pageable, 0, bytes);  // resident: page faults are another benchmark's
        std::memset(b.pageable_cmt, 0, bytes);
        CMT_CHECK_CUDA(cudaMallocHost(&b.pinned, bytes));
        CMT_CHECK_CUDA(cudaMalloc(&b.dev, bytes));
        CMT_CHECK_CUDA(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
      }).join();
    }
  }

  void release() {
    for (Buffers& b : bufs_) {
      CMT_CHECK_CUDA(cudaSetDevice(b.device));
      std::free(b.pageable);
      std::free(b.pageable_cmt);
      CMT_CHECK_CUDA(cudaFreeHost(b.pinned));
      CMT_CHECK_CUDA(cudaFree(b.dev));
      CMT_CHECK_CUDA(cudaStreamDestroy(b.stream));
    }
    bufs_.clear();
  }

  // One window: `mode` (0 default, 1 cmt, 2 pinned), every thread copying `bytes` at a time.
  Outcome window(int mode, const std::string& pattern, std::size_t bytes, std::uint64_t seed) {
    std::vector<Window> w(bufs_.size());
    std::atomic<unsigned> ready{0};
    std::atomic<bool> go{false};
    WindowEnd end(bufs_.size());
    Clock::time_point t0;
    auto body = [&](unsigned t) {
      Buffers& b = bufs_[t];
      Window& mine = w[t];
      cmt::pin_current_thread(b.cpus);
      CMT_CHECK_CUDA(cudaSetDevice(b.device));
      mine.h2d = pattern == "h2d" || (pattern == "both" && (t % o_.threads) % 2 == 0);
      const std::uint64_t s = seed * 1315423911u + t;
      unsigned char* host = mode == 2 ? b.pinned : mode == 1 ? b.pageable_cmt : b.pageable;
      // Known contents on the source side, zeros on the destination side.
      if (mine.h2d) {
        write_pattern(host, bytes, s);
        CMT_CHECK_CUDA(cudaMemsetAsync(b.dev, 0, bytes, b.stream));
      } else {
        write_pattern(b.pinned, bytes, s);
        CMT_CHECK_CUDA(cudaMemcpyAsync(b.dev, b.pinned, bytes, cudaMemcpyHostToDevice, b.stream));
        if (mode != 2) std::memset(host, 0, bytes);
      }
      CMT_CHECK_CUDA(cudaStreamSynchronize(b.stream));
      if (mode == 2 && !mine.h2d) std::memset(host, 0, bytes);
      forward_(mode == 0 ? 1 : 0);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const auto start = Clock::now();
      auto now = start, before = start;
      std::size_t copies = 0;
      mine.copy_s.reserve(1u << 16);
      do {
        void* dst = mine.h2d ? b.dev : static_cast<void*>(host);
        const void* src = mine.h2d ? static_cast<const void*>(host) : b.dev;
        const cudaMemcpyKind kind = mine.h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
        if (o_.null_stream) {
          CMT_CHECK_CUDA(cudaMemcpy(dst, src, bytes, kind));
        } else {
          CMT_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, b.stream));
          CMT_CHECK_CUDA(cudaStreamSynchronize(b.stream));
        }
        ++copies;
        now = Clock::now();
        mine.copy_s.push_back(std::chrono::duration<double>(now - before).count());
        before = now;
      } while (now - t0 < std::chrono::duration<double>(o_.seconds));
      end.arrive();
      forward_(0);
      mine.start = std::chrono::duration<double>(start - t0).count();
      mine.end = std::chrono::duration<double>(now - t0).count();
      mine.bytes = copies * bytes;
      // The bytes the last copy left.
      if (mine.h2d) {
        CMT_CHECK_CUDA(cudaMemcpy(b.pinned, b.dev, bytes, cudaMemcpyDeviceToHost));
        mine.right = has_pattern(b.pinned, bytes, s);
      } else {
        mine.right = has_pattern(host, bytes, s);
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < bufs_.size(); ++t) pool.emplace_back(body, t);
    while (ready.load() < bufs_.size()) std::this_thread::yield();
    const double cpu_start = process_cpu_seconds();
    t0 = Clock::now();
    go.store(true, std::memory_order_release);
    for (auto& t : pool) t.join();
    Outcome out;
    double moved = 0;
    for (const Window& x : w) moved += static_cast<double>(x.bytes);
    out.cpu_s_per_gb = moved > 0 ? (end.cpu_end() - cpu_start) / (moved / 1e9) : 0;
    std::vector<double> medians;
    for (const Window& x : w) {
      medians.push_back(median(x.copy_s) * 1e6);
      if (!x.copy_s.empty()) out.first_copy_us = std::max(out.first_copy_us, x.copy_s[0] * 1e6);
    }
    out.copy_median_us = median(medians);
    double shared_start = 0, shared_end = 1e30, first_start = 1e30, last_end = 0;
    for (const Window& x : w) {
      shared_start = std::max(shared_start, x.start);
      shared_end = std::min(shared_end, x.end);
      first_start = std::min(first_start, x.start);
      last_end = std::max(last_end, x.end);
    }
    const double span = last_end - first_start;
    out.overlap = 1;
    out.per_gpu.assign(set_.size(), 0);
    for (std::size_t t = 0; t < w.size(); ++t) {
      const Window& x = w[t];
      (x.h2d ? out.h2d : out.d2h) += static_cast<double>(x.bytes) / span / 1e9;
      out.per_gpu[t / o_.threads] += static_cast<double>(x.bytes) / span / 1e9;
      out.sum_of_rates += x.gbps();
      out.right = out.right && x.right;
      const double own = x.end - x.start;
      out.overlap =
          std::min(out.overlap, own > 0 ? std::max(0.0, shared_end - shared_start) / own : 0);
    }
    return out;
  }

 private:
  const Options& o_;
  ForwardFn forward_;
  std::vector<int> set_;
  std::vector<Buffers> bufs_;
};

// memcpy between two resident buffers of `bytes` on `threads` threads taking `piece`-byte pieces
// in turn, started together: payload GB/s, the median of 5.
double host_memcpy_gbps(std::size_t bytes, unsigned threads, std::size_t piece) {
  std::vector<unsigned char> a(bytes, 1), b(bytes, 2);
  std::vector<double> rates;
  for (int rep = 0; rep < 6; ++rep) {
    std::atomic<bool> go{false};
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (std::size_t at; (at = next.fetch_add(piece)) < bytes;)
          std::memcpy(b.data() + at, a.data() + at, std::min(piece, bytes - at));
      });
    const auto t0 = Clock::now();
    go.store(true, std::memory_order_release);
    for (auto& t : pool) t.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rep > 0) rates.push_back(static_cast<double>(bytes) / s / 1e9);
  }
  return median(rates);
}

struct Cell {
  std::vector<int> gpus;
  std::size_t bytes;
  std::string pattern;
  std::vector<std::vector<double>> per_gpu[3];  // by set position, the rounds' values
  std::vector<double> h2d[3], d2h[3], total[3], sum_of_rates[3], overlap[3], cpu_s_per_gb[3];
  std::vector<double> copy_median_us[3], first_copy_us[3];
};

// `cmt bench topo`'s sets (topology.h bandwidth_sets): each GPU alone, the GPUs behind each PCIe
// root port, those of each NUMA node, all of them; where each GPU sits, as hwloc reads it, is
// added to `placement` ("GPU 0: node 0, root port 0000:00:01.0; ...").
std::vector<std::vector<int>> auto_sets(int devices, std::string* placement) {
  const cmt::HostTopology topology = cmt::read_topology();
  std::vector<cmt::GpuSetMember> members;
  for (int d = 0; d < devices; ++d) {
    char pci[64] = {};
    CMT_CHECK_CUDA(cudaDeviceGetPCIBusId(pci, sizeof(pci), d));
    cmt::GpuSetMember m;
    m.ordinal = d;
    m.numa_node = cmt::gpu_locality(pci).numa_node;
    for (const cmt::GpuPlacement& g : topology.gpus)
      if (strcasecmp(g.pci_bus_id.c_str(), pci) == 0) m.root_port = g.root_port;
    members.push_back(m);
    *placement += (placement->empty() ? "" : "; ") + std::string("GPU ") + std::to_string(d) +
                  " (" + pci + "): NUMA node " + std::to_string(m.numa_node) + ", root port " +
                  (m.root_port.empty() ? "none" : m.root_port);
  }
  return cmt::bandwidth_sets(members);
}

std::string set_text(const std::vector<int>& set) {
  std::string t;
  for (int d : set) t += (t.empty() ? "" : ",") + std::to_string(d);
  return t;
}

// What the results are labelled with, and the host's yardstick (the staging bound).
struct Setting {
  std::string date, placement;
  cudaDeviceProp prop{};
  int devices = 0;
  unsigned cpus = 1;
  double memcpy_one = 0, memcpy_small = 0, memcpy_large = 0, staging_bound = 0;
};

// Reads the machine, prints the heading and measures the host's memcpy with no GPU traffic.
Setting describe_setting(const Options& o, int devices, const std::string& placement) {
  Setting s;
  s.devices = devices;
  s.placement = placement;
  CMT_CHECK_CUDA(cudaGetDeviceProperties(&s.prop, o.sets[0][0]));
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  s.date = date;
  s.cpus = std::max(1u, std::thread::hardware_concurrency());
  std::string sets_text;
  for (const auto& set : o.sets) sets_text += (sets_text.empty() ? "" : "; ") + set_text(set);
  std::printf(
      "cmt-bench-concurrent  %s  %d x %s  %u CPUs  GPU sets: %s  %u threads per GPU, %s "
      "stream%s, %g s windows, %d rounds\n",
      date, devices, s.prop.name, s.cpus, sets_text.c_str(), o.threads,
      o.null_stream ? "the legacy" : "own", o.null_stream ? "" : "s", o.seconds, o.rounds);
  if (!placement.empty()) std::printf("%s\n", placement.c_str());
  s.memcpy_one = host_memcpy_gbps(1u << 30, 1, 1u << 30);
  s.memcpy_small = host_memcpy_gbps(1u << 30, s.cpus, 256u << 10);
  s.memcpy_large = host_memcpy_gbps(1u << 30, s.cpus, 4u << 20);
  s.staging_bound = std::max(s.memcpy_small, s.memcpy_large);
  std::printf(
      "host memcpy of 1 GiB, resident: %.1f GB/s on 1 thread; on %u: %.1f GB/s in 256 KiB "
      "pieces, %.1f in 4 MiB ones; staging bound %.1f GB/s\n",
      s.memcpy_one, s.cpus, s.memcpy_small, s.memcpy_large, s.staging_bound);
  return s;
}

// One cell: `o.rounds` windows of each mode, which mode goes first rotating.
Cell measure_cell(Bench& bench, const Options& o, const std::vector<int>& set, std::size_t bytes,
                  const std::string& pattern, std::uint64_t* seed, long* wrong) {
  Cell cell;
  cell.gpus = set;
  cell.bytes = bytes;
  cell.pattern = pattern;
  for (auto& v : cell.per_gpu) v.assign(set.size(), {});
  for (int round = 0; round < o.rounds; ++round)
    for (int k = 0; k < 3; ++k) {
      const int mode = (k + round) % 3;
      const Outcome out = bench.window(mode, pattern, bytes, ++*seed);
      if (!out.right) ++*wrong;
      cell.h2d[mode].push_back(out.h2d);
      cell.d2h[mode].push_back(out.d2h);
      cell.total[mode].push_back(out.h2d + out.d2h);
      cell.sum_of_rates[mode].push_back(out.sum_of_rates);
      cell.overlap[mode].push_back(out.overlap);
      cell.cpu_s_per_gb[mode].push_back(out.cpu_s_per_gb);
      cell.copy_median_us[mode].push_back(out.copy_median_us);
      cell.first_copy_us[mode].push_back(out.first_copy_us);
      for (std::size_t g = 0; g < set.size(); ++g) cell.per_gpu[mode][g].push_back(out.per_gpu[g]);
    }
  return cell;
}

void print_cell(const Options& o, const Cell& cell, double staging_bound) {
  const std::vector<int>& set = cell.gpus;
  std::printf("%s%s x %u threads%s, %s:\n",
              o.sets.size() > 1 || set.size() > 1 ? ("GPUs " + set_text(set) + ": ").c_str() : "",
              cmt::format_byte_size(cell.bytes).c_str(), o.threads,
              set.size() > 1 ? " per GPU" : "", cell.pattern.c_str());
  for (int m = 0; m < 3; ++m) {
    const double ov = *std::min_element(cell.overlap[m].begin(), cell.overlap[m].end());
    const auto& t = cell.total[m];
    std::printf("  %-7s %6.1f GB/s [%5.1f-%5.1f]", kModes[m], median(t),
                *std::min_element(t.begin(), t.end()), *std::max_element(t.begin(), t.end()));
    if (cell.pattern == "both")
      std::printf(" (h2d %.1f + d2h %.1f)", median(cell.h2d[m]), median(cell.d2h[m]));
    if (set.size() > 1) {
      std::printf(" (");
      for (std::size_t g = 0; g < set.size(); ++g)
        std::printf("%sGPU %d %.1f", g ? ", " : "", set[g], median(cell.per_gpu[m][g]));
      std::printf(")");
    }
    if (ov >= kOverlapNeeded)
      std::printf("  windows overlap %.1f%%, sum of rates %.1f", 100 * ov,
                  median(cell.sum_of_rates[m]));
    else
      std::printf("  windows overlap %.1f%% (no sum of rates)", 100 * ov);
    std::printf(", cpu %.3f s/GB, a copy %.1f us (first %.0f us)\n", median(cell.cpu_s_per_gb[m]),
                median(cell.copy_median_us[m]),
                *std::max_element(cell.first_copy_us[m].begin(), cell.first_copy_us[m].end()));
  }
  std::printf("  cmt/default %.2fx, cmt/pinned %.2f, cmt/staging bound %.2f\n",
              median(cell.total[1]) / median(cell.total[0]),
              median(cell.total[1]) / median(cell.total[2]), median(cell.total[1]) / staging_bound);
  std::fflush(stdout);
}

void write_json(const Options& o, const Setting& s, const std::vector<Cell>& cells, long wrong,
                int argc, char** argv) {
  cmt::OutputFile out(o.json);
  std::FILE* f = out.stream();
  if (!f) fail("cannot write " + o.json + ": " + out.why());
  std::string cmdline;
  for (int i = 0; i < argc; ++i) cmdline += std::string(i ? " " : "") + argv[i];
  std::fprintf(
      f,
      "{\n  \"benchmark\": \"cmt-bench-concurrent\",\n  \"cmt_version\": \"%s\",\n  "
      "\"date\": \"%s\",\n  \"command\": \"%s\",\n  \"gpu\": \"%s\",\n  \"gpus\": %d,\n  "
      "\"placement\": \"%s\",\n  \"cpus\": %u,\n  "
      "\"threads\": %u,\n  \"stream\": \"%s\",\n  \"seconds\": %.2f,\n  \"rounds\": %d,\n  "
      "\"host_memcpy_one_thread_gbps\": %.2f,\n  \"host_memcpy_all_cpus_256k_gbps\": %.2f,\n  "
      "\"host_memcpy_all_cpus_4m_gbps\": %.2f,\n  \"staging_bound_gbps\": %.2f,\n  "
      "\"aggregate\": \"all threads' bytes over the span from the first start to the "
      "last end\",\n  \"cpu\": \"the process's CPU seconds from the barrier to the last copy's "
      "end, per GB moved\",\n  \"wrong_windows\": %ld,\n  \"results\": [\n",
      CMT_VERSION, s.date.c_str(), cmdline.c_str(), s.prop.name, s.devices, s.placement.c_str(),
      s.cpus, o.threads, o.null_stream ? "null" : "own", o.seconds, o.rounds, s.memcpy_one,
      s.memcpy_small, s.memcpy_large, s.staging_bound, wrong);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    std::fprintf(f, "    {\"gpus\": [%s], \"bytes\": %zu, \"pattern\": \"%s\"",
                 set_text(c.gpus).c_str(), c.bytes, c.pattern.c_str());
    for (int m = 0; m < 3; ++m) {
      const auto& t = c.total[m];
      const double ov = *std::min_element(c.overlap[m].begin(), c.overlap[m].end());
      std::fprintf(f,
                   ", \"%s\": {\"total_gbps\": %.3f, \"min_gbps\": %.3f, \"max_gbps\": %.3f, "
                   "\"h2d_gbps\": %.3f, \"d2h_gbps\": %.3f, \"overlap_min\": %.4f, "
                   "\"sum_of_rates_gbps\": %.3f, \"windows_overlap\": %s, "
                   "\"cpu_s_per_gb\": %.4f, \"copy_median_us\": %.2f, "
                   "\"first_copy_us_max\": %.1f, \"per_gpu_gbps\": [",
                   kModes[m], median(t), *std::min_element(t.begin(), t.end()),
                   *std::max_element(t.begin(), t.end()), median(c.h2d[m]), median(c.d2h[m]), ov,
                   median(c.sum_of_rates[m]), ov >= kOverlapNeeded ? "true" : "false",
                   median(c.cpu_s_per_gb[m]), median(c.copy_median_us[m]),
                   *std::max_element(c.first_copy_us[m].begin(), c.first_copy_us[m].end()));
      for (std::size_t g = 0; g < c.gpus.size(); ++g)
        std::fprintf(f, "%s%.3f", g ? ", " : "", median(c.per_gpu[m][g]));
      std::fprintf(f, "]}");
    }
    std::fprintf(f,
                 ", \"cmt_over_default\": %.3f, \"cmt_over_pinned\": %.3f, "
                 "\"cmt_over_staging_bound\": %.3f}%s\n",
                 median(c.total[1]) / median(c.total[0]), median(c.total[1]) / median(c.total[2]),
                 median(c.total[1]) / s.staging_bound, i + 1 < cells.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  if (!out.commit()) fail("cannot write " + o.json + ": " + out.why());
}

// bench/plot_concurrent.py draws the SVG from the JSON.
void draw_plot(const Options& o) {
  std::string script;
  for (const char* rel : {"/../bench/plot_concurrent.py", "/../../share/cmt/plot_concurrent.py"})
    if (access((cmt::bench::self_dir() + rel).c_str(), R_OK) == 0)
      script = cmt::bench::self_dir() + rel;
  if (script.empty()) fail("bench/plot_concurrent.py not found for --plot");
  const std::string cmd = "python3 '" + script + "' '" + o.json + "' '" + o.plot + "'";
  if (std::system(cmd.c_str()) != 0) fail("drawing the plot failed: " + cmd);
  std::printf("plot: %s\n", o.plot.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int status = parse(argc, argv, &o); status >= 0) return status;
  cmt::bench::ensure_preloaded(argv);
  auto forward = reinterpret_cast<ForwardFn>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread"));
  if (!forward) fail("libcmt.so has no cmt_forward_this_thread");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) fail("no CUDA GPU found");
  std::string placement;
  if (o.auto_sets) o.sets = auto_sets(devices, &placement);
  for (const auto& set : o.sets)
    for (int d : set)
      if (d >= devices) {
        std::fprintf(stderr, "cmt-bench-concurrent: GPU %d out of range (this machine has %d)\n", d,
                     devices);
        return 2;
      }
  CMT_CHECK_CUDA(cudaSetDevice(o.sets[0][0]));
  const Setting setting = describe_setting(o, devices, placement);
  std::vector<Cell> cells;
  long wrong = 0;
  std::uint64_t seed = 1;
  Bench bench(o, forward);
  for (const std::vector<int>& set : o.sets)
    for (std::size_t bytes : o.sizes) {
      bench.allocate(bytes, set);
      for (const std::string& pattern : o.patterns) {
        cells.push_back(measure_cell(bench, o, set, bytes, pattern, &seed, &wrong));
        print_cell(o, cells.back(), setting.staging_bound);
      }
      bench.release();
    }
  if (wrong) std::printf("WRONG BYTES in %ld windows\n", wrong);
  if (!o.json.empty()) write_json(o, setting, cells, wrong, argc, argv);
  if (!o.plot.empty()) draw_plot(o);
  return wrong ? 1 : 0;
}
