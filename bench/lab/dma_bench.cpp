// cmt-bench-dma (lab): what the GPU's copy engine gives cmt's pipeline, with the CPU side taken
// away or put back one part at a time, without libcmt.so. Through cmt, a 16 MiB host-to-device
// copy is fully staged after ~230 us but completes after ~460 us, where one pinned copy takes
// 320 us: the DMAs out of the ring slow down while CPU threads stage (NOTES.md 15-18). The modes
// that remain are the yardsticks; the designs measured against them and dropped (two streams, a
// write-combined ring, flushing the ring, whole pieces per thread, SM kernels pulling, page-locking
// the user's buffer per copy: NOTES.md 19-28) are in git's history.
//
// Each rep is timed from the first enqueue to the stream's completion; median [min-max] GB/s, and
// each mode against `one`.
//
// usage: cmt-bench-dma [--sizes 16M,64M,1G] [--chunk 2M] [--slots 12] [--reps 7]
//                      [--cpu-threads 8] [--modes one,chain,...] [--staging nt|memcpy]
//                      [--json FILE]
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/byte_size.h"
#include "cuda_check.h"
#include "engine/shared/cpu_copy.h"

namespace {

[[noreturn]] void usage(const std::string& why);

// What a mode's CPU threads do while it runs: nothing, or copy between pageable buffers of
// their own with memcpy or with non-temporal stores (the staging workers' memory traffic).
enum class CpuLoad { None, Memcpy, Streaming };

struct Bench;
using RunFn = double (*)(Bench& b, bool h2d, std::size_t bytes);

// One measurement: a key to select it by, what it measures, and how.
struct Mode {
  const char* key;
  const char* description;
  CpuLoad load;
  RunFn run;
};

struct Options {
  std::vector<std::size_t> sizes = {16u << 20, 64u << 20, 1u << 30};
  std::size_t chunk = 2u << 20;
  int slots = 12, reps = 7, cpu_threads = 8;
  bool staging_nt = true;  // how the staged mode's threads copy: non-temporal stores or memcpy
  std::vector<std::string> modes;  // empty: every mode
  std::string json;
};

// A staging ring as libcmt.so's: `slots` x `chunk` bytes mapped, pre-faulted and registered.
struct Ring {
  char* data = nullptr;
  std::size_t bytes = 0;
  explicit Ring(std::size_t n) : bytes(n) {
    void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) usage("cannot map the ring");
    std::memset(m, 1, n);
    CMT_CHECK_CUDA(cudaHostRegister(m, n, cudaHostRegisterPortable));
    data = static_cast<char*>(m);
  }
  ~Ring() {
    cudaHostUnregister(data);
    munmap(data, bytes);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
};

// Everything a mode may use, allocated once for the largest size.
struct Bench {
  const Options& opt;
  char* dev = nullptr;
  char* pinned = nullptr;
  std::vector<char> source, drained;  // pageable: what `staged` copies from (H2D) and into (D2H)
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;  // one per slot
  std::unique_ptr<Ring> ring;

  Bench(const Options& o, std::size_t max_bytes)
      : opt(o), source(max_bytes, 3), drained(max_bytes, 4) {
    CMT_CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&dev), max_bytes));
    CMT_CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&pinned), max_bytes));
    std::memset(pinned, 1, max_bytes);
    CMT_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    events.resize(static_cast<std::size_t>(o.slots));
    for (auto& e : events) CMT_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ring = std::make_unique<Ring>(o.chunk * static_cast<std::size_t>(o.slots));
  }
  ~Bench() {
    ring.reset();
    for (auto& e : events) cudaEventDestroy(e);
    cudaStreamDestroy(stream);
    cudaFreeHost(pinned);
    cudaFree(dev);
  }
  char* user(bool h2d) { return h2d ? source.data() : drained.data(); }
};

// Memory traffic like the staging workers': each thread copies between two pageable buffers of
// its own until stopped.
class BusyCpus {
 public:
  BusyCpus(int threads, std::size_t bytes, bool streaming) {
    for (int t = 0; t < threads; ++t)
      threads_.emplace_back([this, bytes, streaming] {
        std::vector<char> a(bytes, 1), b(bytes, 2);
        ready_.fetch_add(1);
        while (!stop_.load(std::memory_order_relaxed)) {
          if (streaming)
            cmt::copy_streaming(b.data(), a.data(), bytes);
          else
            std::memcpy(b.data(), a.data(), bytes);
        }
      });
    while (ready_.load() < threads) std::this_thread::yield();
  }
  ~BusyCpus() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> ready_{0};
  std::vector<std::thread> threads_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void dma(bool h2d, char* dev, char* host, std::size_t n, cudaStream_t s) {
  CMT_CHECK_CUDA(h2d ? cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, s)
                     : cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, s));
}

// ---- the modes ------------------------------------------------------------------------------

// One whole-size DMA between the device buffer and `host`.
double time_one_dma(Bench& b, bool h2d, std::size_t bytes, char* host) {
  auto t0 = std::chrono::steady_clock::now();
  dma(h2d, b.dev, host, bytes, b.stream);
  CMT_CHECK_CUDA(cudaStreamSynchronize(b.stream));
  return seconds_since(t0);
}

double run_one(Bench& b, bool h2d, std::size_t bytes) {
  return time_one_dma(b, h2d, bytes, b.pinned);
}

double run_pageable(Bench& b, bool h2d, std::size_t bytes) {
  return time_one_dma(b, h2d, bytes, b.user(h2d));
}

// Chunk-sized DMAs enqueued back to back from one pinned buffer, nothing between them.
double run_chain(Bench& b, bool h2d, std::size_t bytes) {
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t off = 0; off < bytes; off += b.opt.chunk)
    dma(h2d, b.dev + off, b.pinned + off, std::min(b.opt.chunk, bytes - off), b.stream);
  CMT_CHECK_CUDA(cudaStreamSynchronize(b.stream));
  return seconds_since(t0);
}

// Waits for the last DMA of a slot: its event, polled as the engine polls.
void wait_slot(Bench& b, std::vector<bool>& pending, std::size_t slot) {
  if (!pending[slot]) return;
  cudaError_t e;
  while ((e = cudaEventQuery(b.events[slot])) == cudaErrorNotReady) {
  }
  CMT_CHECK_CUDA(e);
  pending[slot] = false;
}

// The engine's DMA pattern: chunk-sized DMAs through the ring's slots, an event after each, a
// slot reused only once its previous DMA has completed.
double run_pieces(Bench& b, bool h2d, std::size_t bytes) {
  const std::size_t slots = b.events.size();
  std::vector<bool> pending(slots, false);
  auto t0 = std::chrono::steady_clock::now();
  std::size_t i = 0;
  for (std::size_t off = 0; off < bytes; off += b.opt.chunk, ++i) {
    const std::size_t slot = i % slots;
    wait_slot(b, pending, slot);
    dma(h2d, b.dev + off, b.ring->data + slot * b.opt.chunk, std::min(b.opt.chunk, bytes - off),
        b.stream);
    CMT_CHECK_CUDA(cudaEventRecord(b.events[slot], b.stream));
    pending[slot] = true;
  }
  CMT_CHECK_CUDA(cudaStreamSynchronize(b.stream));
  return seconds_since(t0);
}

// The engine's pipeline without the engine. Host to device: --cpu-threads threads stage the
// pageable source into the ring's slots (each piece split in one unit per thread, taken in
// order), a slot handed out only once its previous DMA is done, and each piece's DMA enqueued as
// soon as all of its units are staged. Device to host: DMAs into every slot whose previous piece
// is drained, and each piece handed to the threads, which drain it into the pageable
// destination the same way, as soon as its DMA has landed.
double run_staged(Bench& b, bool h2d, std::size_t bytes) {
  const std::size_t chunk = b.opt.chunk, nslots = b.events.size();
  const std::size_t pieces = (bytes + chunk - 1) / chunk;
  const int threads = std::max(b.opt.cpu_threads, 1);
  const std::size_t units = static_cast<std::size_t>(threads);
  char* host = b.user(h2d);
  auto length = [&](std::size_t p) { return std::min(chunk, bytes - p * chunk); };
  auto slot_of = [&](std::size_t p) { return b.ring->data + (p % nslots) * chunk; };
  std::unique_ptr<std::atomic<std::size_t>[]> done(new std::atomic<std::size_t>[pieces]());
  // H2D: pieces whose slots the threads may fill; D2H: pieces landed, for the threads to drain.
  std::atomic<std::size_t> next_unit{0}, published{0};
  const auto copy = b.opt.staging_nt ? cmt::copy_streaming : cmt::copy_memcpy;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      for (;;) {
        const std::size_t u = next_unit.fetch_add(1);
        if (u >= pieces * units) return;
        const std::size_t p = u / units, k = u % units;
        while (published.load(std::memory_order_acquire) <= p) {
        }
        const std::size_t n = length(p);
        const std::size_t share = ((n + units - 1) / units + 63) & ~std::size_t{63};
        const std::size_t begin = k * share;
        if (begin < n) {
          char* in_ring = slot_of(p) + begin;
          char* user = host + p * chunk + begin;
          const std::size_t m = std::min(share, n - begin);
          h2d ? copy(in_ring, user, m) : copy(user, in_ring, m);
        }
        done[p].fetch_add(1, std::memory_order_release);
      }
    });
  auto staged = [&](std::size_t p) { return done[p].load(std::memory_order_acquire) == units; };
  std::vector<bool> pending(nslots, false);
  auto enqueue = [&](std::size_t p) {
    dma(h2d, b.dev + p * chunk, slot_of(p), length(p), b.stream);
    CMT_CHECK_CUDA(cudaEventRecord(b.events[p % nslots], b.stream));
    pending[p % nslots] = true;
  };
  auto landed = [&](std::size_t p) {  // p's DMA (the last one in its slot) has completed
    if (!pending[p % nslots]) return true;
    cudaError_t e = cudaEventQuery(b.events[p % nslots]);
    if (e == cudaErrorNotReady) return false;
    CMT_CHECK_CUDA(e);
    pending[p % nslots] = false;
    return true;
  };
  auto t0 = std::chrono::steady_clock::now();
  std::size_t issued = 0, pub = 0;
  if (h2d) {
    while (issued < pieces) {
      while (pub < pieces && pub < issued + nslots && (pub < nslots || landed(pub - nslots)))
        published.store(++pub, std::memory_order_release);
      if (issued < pub && staged(issued)) enqueue(issued++);
    }
  } else {
    while (pub < pieces) {
      while (issued < pieces && (issued < nslots || staged(issued - nslots))) enqueue(issued++);
      if (pub < issued && landed(pub)) published.store(++pub, std::memory_order_release);
    }
    for (std::size_t p = 0; p < pieces; ++p)
      while (!staged(p)) {
      }
  }
  CMT_CHECK_CUDA(cudaStreamSynchronize(b.stream));
  const double s = seconds_since(t0);
  for (auto& w : workers) w.join();
  return s;
}

const Mode kModes[] = {
    {"one", "one DMA of the whole size from (to) a cudaMallocHost buffer: the ceiling",
     CpuLoad::None, run_one},
    {"chain", "back-to-back chunk-sized DMAs from one pinned buffer: the cost of splitting alone",
     CpuLoad::None, run_chain},
    {"pieces",
     "chunk-sized DMAs through a registered ring, an event after each, a slot reused once its "
     "event completed: the engine's DMA side alone",
     CpuLoad::None, run_pieces},
    {"busy", "pieces, while --cpu-threads threads memcpy between pageable buffers", CpuLoad::Memcpy,
     run_pieces},
    {"busynt", "pieces, while the threads copy with non-temporal stores, as staging does",
     CpuLoad::Streaming, run_pieces},
    {"staged",
     "the engine's pipeline without the engine: --cpu-threads threads stage (drain) each piece "
     "together, its DMA enqueued once staged (its drain once landed)",
     CpuLoad::None, run_staged},
    {"pageable", "one cudaMemcpyAsync straight from (into) pageable memory: CUDA's own path",
     CpuLoad::None, run_pageable},
};

const Mode* find_mode(const std::string& key) {
  for (const Mode& m : kModes)
    if (key == m.key) return &m;
  return nullptr;
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "cmt-bench-dma: %s\nusage: cmt-bench-dma [--sizes 16M,64M,1G] [--chunk 2M] "
               "[--slots 12] [--reps 7] [--cpu-threads 8] [--modes one,pieces,...] "
               "[--staging nt|memcpy] [--json FILE]\nmodes:\n",
               why.c_str());
  for (const Mode& m : kModes) std::fprintf(stderr, "  %-9s %s\n", m.key, m.description);
  std::exit(2);
}

std::size_t size_arg(const std::string& text, const char* what) {
  std::size_t v = 0;
  if (!cmt::parse_byte_size(text, &v) || v == 0)
    usage(std::string("bad ") + what + " '" + text + "' (expected a size such as 2M)");
  return v;
}

int count_arg(const std::string& text, const char* what, int min) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end || v < min || v > 4096)
    usage(std::string("bad ") + what + " '" + text + "' (expected an integer from " +
          std::to_string(min) + ")");
  return static_cast<int>(v);
}

// "a,b,,c" -> {"a", "b", "c"}
std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  for (char c : text + ",") {
    if (c != ',') {
      item += c;
    } else if (!item.empty()) {
      items.push_back(item);
      item.clear();
    }
  }
  return items;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--sizes") {
      o.sizes.clear();
      for (const std::string& item : split_commas(value()))
        o.sizes.push_back(size_arg(item, "size"));
      if (o.sizes.empty()) usage("--sizes is empty");
    } else if (a == "--chunk") {
      o.chunk = size_arg(value(), "chunk");
    } else if (a == "--slots") {
      o.slots = count_arg(value(), "--slots", 2);
    } else if (a == "--reps") {
      o.reps = count_arg(value(), "--reps", 1);
    } else if (a == "--cpu-threads") {
      o.cpu_threads = count_arg(value(), "--cpu-threads", 0);
    } else if (a == "--staging") {
      const std::string v = value();
      if (v != "nt" && v != "memcpy") usage("bad --staging '" + v + "' (expected nt or memcpy)");
      o.staging_nt = v == "nt";
    } else if (a == "--modes") {
      o.modes = split_commas(value());
      for (const std::string& m : o.modes)
        if (!find_mode(m)) usage("unknown mode '" + m + "'");
      if (o.modes.empty()) usage("--modes is empty");
    } else if (a == "--json") {
      o.json = value();
    } else {
      usage("unknown argument '" + a + "'");
    }
  }
  if (o.modes.empty())
    for (const Mode& m : kModes) o.modes.push_back(m.key);
  return o;
}

struct Result {
  std::size_t bytes;
  const char* dir;
  const char* mode;
  std::vector<double> gbps;
  double median() const {
    std::vector<double> v = gbps;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  }
};

void write_json(const Options& opt, const char* date, const char* gpu,
                const std::vector<Result>& results) {
  std::ofstream out(opt.json);
  out << "{\n \"benchmark\": \"cmt-bench-dma\",\n \"date\": \"" << date << "\",\n \"gpu\": \""
      << gpu << "\",\n \"chunk\": " << opt.chunk << ",\n \"slots\": " << opt.slots
      << ",\n \"reps\": " << opt.reps << ",\n \"cpu_threads\": " << opt.cpu_threads
      << ",\n \"staging\": \"" << (opt.staging_nt ? "nt" : "memcpy") << "\",\n \"results\": [";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    out << (i ? "," : "") << "\n  {\"bytes\": " << r.bytes << ", \"direction\": \"" << r.dir
        << "\", \"mode\": \"" << r.mode << "\", \"median_gbps\": " << r.median() << ", \"gbps\": [";
    for (std::size_t k = 0; k < r.gbps.size(); ++k) out << (k ? ", " : "") << r.gbps[k];
    out << "]}";
  }
  out << "\n ]\n}\n";
  if (!out) {
    std::fprintf(stderr, "cmt-bench-dma: cannot write %s\n", opt.json.c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cmt-bench-dma: no CUDA GPU found\n");
    return 1;
  }
  CMT_CHECK_CUDA(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CMT_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  Bench bench(opt, *std::max_element(opt.sizes.begin(), opt.sizes.end()));

  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf("cmt-bench-dma  %s  GPU: %s  %s x %d slots, %d reps, %d CPU threads, staged: %s\n",
              date, prop.name, cmt::format_byte_size(opt.chunk).c_str(), opt.slots, opt.reps,
              opt.cpu_threads, opt.staging_nt ? "nt" : "memcpy");

  std::vector<Result> results;
  for (std::size_t bytes : opt.sizes)
    for (bool h2d : {true, false})
      for (const std::string& key : opt.modes) {
        const Mode& m = *find_mode(key);
        Result r{bytes, h2d ? "h2d" : "d2h", m.key, {}};
        std::unique_ptr<BusyCpus> busy;
        if (m.load != CpuLoad::None)
          busy =
              std::make_unique<BusyCpus>(opt.cpu_threads, 64u << 20, m.load == CpuLoad::Streaming);
        for (int rep = -1; rep < opt.reps; ++rep) {  // rep -1 warms up
          const double s = m.run(bench, h2d, bytes);
          if (rep == -1 && !h2d && m.run == run_staged) {  // the drain delivered the device's bytes
            std::vector<char> want(bytes);
            CMT_CHECK_CUDA(cudaMemcpy(want.data(), bench.dev, bytes, cudaMemcpyDeviceToHost));
            if (std::memcmp(want.data(), bench.drained.data(), bytes) != 0) {
              std::fprintf(stderr, "cmt-bench-dma: staged drained wrong bytes\n");
              return 1;
            }
          }
          if (rep >= 0) r.gbps.push_back(static_cast<double>(bytes) / s / 1e9);
        }
        results.push_back(r);
      }

  std::printf("%6s %4s %8s %8s %15s %8s\n", "size", "dir", "mode", "GB/s", "[min-max]", "/ one");
  double one = 0;
  for (const Result& r : results) {
    if (std::string(r.mode) == "one") one = r.median();
    auto [lo, hi] = std::minmax_element(r.gbps.begin(), r.gbps.end());
    std::printf("%6s %4s %8s %8.1f [%5.1f-%5.1f] %8.2f\n", cmt::format_byte_size(r.bytes).c_str(),
                r.dir, r.mode, r.median(), *lo, *hi, one > 0 ? r.median() / one : 0.0);
  }
  if (!opt.json.empty()) write_json(opt, date, prop.name, results);
  return 0;
}
