// `cmt bench replay FILE`: a program's recorded copies (`cmt run --record`, tuner/trace_file.h)
// made again on this machine, CUDA's default path against cmt against pinned memory, in one
// process, rounds alternating, after one round of each mode in which every byte of every copy is
// checked (which also warms the mode up). --window replays a part of the trace.
//
// Each recorded thread becomes a replay thread that makes its host <-> device copies in order,
// with the same sizes, directions and kind of call (cudaMemcpy, or cudaMemcpyAsync and, where the
// program waited for the GPU before its next copy, a stream synchronize: version 6 says where;
// before it, after every copy), from host memory of the recorded kind: resident (the thread's
// buffer, written once), a fresh mapping of a file in the page cache (file_cached), new anonymous
// memory (fresh), or CUDA host memory (pinned); from a trace that says where host sides were
// (version 4), a buffer the program copied more than once from a buffer of its own and any other
// resident copy from a place not used for thousands of copies, so that hot buffers
// (CMT_REGISTER=hot) register what they would have in the program (tuner/replay_plan.h). Between
// two copies it does CPU work for the recorded gap (less the time the program spent in synchronize
// calls there, version 6), and it starts at its first copy's recorded offset. Where the trace says
// how long each copy's stream ran other work since the copy before (version 5: the program's
// kernels), the replay has the GPU busy that long on the copy's stream as the CPU work starts, with
// a kernel that waits on the GPU's clock, so that a copy waits for the stream as the program's did
// (a copy staged by cmt or CUDA cannot start its DMAs before the stream reaches it; --gpu-work off
// leaves the stream idle). Copies through the host leg, batches and GPU-to-GPU copies are not
// replayed. In the pinned mode every host side is the thread's pinned buffer: the ceiling. Reported
// per mode: the wall time of a round, the bytes over it, median of the rounds, their spread, and
// the ratios.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_process.h"
#include "common/output_file.h"
#include "cuda_check.h"
#include "replay_plan.h"
#include "trace_file.h"

namespace {

using Clock = std::chrono::steady_clock;
using ForwardFn = int (*)(int);

using cmt::replay::Copy;

// The program's own work between copies. By default (--gap-work time) a busy loop of the recorded
// length, which nothing beside it lengthens. With --gap-work work, a fixed amount of work: the
// amount that takes the recorded gap on this machine with nothing else running (calibrated once),
// integer hashing over a table of 1 MiB of the thread's own, so that whatever slows a program's own
// work beside cmt slows the replay's too (NOTES.md 80 read offload's Python work as a third longer
// under staging; NOTES.md 82 found it the same in every mode). Not the default: on its one GPU run
// it read cmt at 0.54 of pinned over offload's steady passes where the program itself ran at 0.82.
class GapWork {
 public:
  static constexpr std::size_t kTableWords = (1u << 20) / sizeof(std::uint64_t);
  static constexpr int kStepsPerUnit = 256;

  GapWork() : table_(kTableWords, 7) {}
  // `units` of work.
  std::uint64_t run(std::uint64_t units) {
    std::uint64_t h = h_, at = at_;
    for (std::uint64_t u = 0; u < units; ++u)
      for (int i = 0; i < kStepsPerUnit; ++i) {
        at = (at + (h >> 7)) & (kTableWords - 1);
        h = (h ^ table_[at]) * 1099511628211ull;
        table_[at] += h & 3;
      }
    at_ = at;
    return h_ = h;
  }
  // Nanoseconds a unit takes on this thread now, the median of a few tries of ~2 ms each.
  double ns_per_unit() {
    std::vector<double> tries;
    for (int i = 0; i < 7; ++i) {
      const auto t0 = Clock::now();
      run(2000);
      tries.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / 2000);
    }
    std::sort(tries.begin(), tries.end());
    return tries[tries.size() / 2];
  }

 private:
  std::vector<std::uint64_t> table_;
  std::uint64_t h_ = 1469598103934665603ull, at_ = 0;
};

struct ReplayThread {
  std::vector<Copy> copies;
  std::size_t most = 0;  // the largest copy
  // Made once, before the rounds.
  unsigned char* resident = nullptr;  // a source, then a destination, each most + kSpread bytes
  unsigned char* pinned = nullptr;
  void* device = nullptr;
  cudaStream_t stream = nullptr;
  const std::vector<unsigned char*>* buffers = nullptr;  // the program's buffers copied again
  std::size_t spread = 0;  // copies made from a buffer copied once, in all rounds so far
  GapWork work;            // its CPU work between copies
};

// The room a thread's resident source and destination take past their largest copy, for copies
// from buffers the program copied once (replay_plan.h).
constexpr std::size_t kSpread = cmt::replay::kSpreadPlaces * cmt::replay::kSpreadStep;

enum class Mode { Default, Cmt, Pinned };

// The GPU work the program did on a copy's stream between copies, replayed as a kernel of one
// thread that waits until the GPU's clock (%globaltimer, ns) has moved on by its argument. PTX,
// compiled by the driver when loaded: the benchmark needs no device compiler.
const char* const kBusyPtx = R"(
.version 8.0
.target sm_75
.address_size 64
.visible .entry cmt_replay_busy(.param .u64 cmt_replay_busy_ns)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [cmt_replay_busy_ns];
  mov.u64 %rd2, %globaltimer;
  add.s64 %rd3, %rd2, %rd1;
BUSY:
  mov.u64 %rd4, %globaltimer;
  setp.lt.u64 %p1, %rd4, %rd3;
  @%p1 bra BUSY;
  ret;
}
)";

struct GpuWork {
  cudaKernel_t kernel = nullptr;  // null: the streams stay idle between copies
};

// The busy kernel, or none with `why` set.
GpuWork load_gpu_work(std::string* why) {
  GpuWork w;
  cudaLibrary_t library = nullptr;
  cudaError_t e = cudaLibraryLoadData(&library, kBusyPtx, nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (e == cudaSuccess) e = cudaLibraryGetKernel(&w.kernel, library, "cmt_replay_busy");
  if (e != cudaSuccess) {
    *why = cudaGetErrorString(e);
    w.kernel = nullptr;
  }
  return w;
}

// `ns` of GPU work on `stream`, queued now.
void busy(const GpuWork& w, cudaStream_t stream, std::uint64_t ns) {
  unsigned long long arg = ns;
  void* args[] = {&arg};
  CMT_CHECK_CUDA(
      cudaLaunchKernel(reinterpret_cast<const void*>(w.kernel), dim3(1), dim3(1), args, 0, stream));
}

double g_ns_per_unit = 0;  // 0: the gaps are busy loops of their recorded length (--gap-work time)

void work_for(GapWork& work, std::uint64_t ns) {
  if (g_ns_per_unit > 0) {
    work.run(static_cast<std::uint64_t>(static_cast<double>(ns) / g_ns_per_unit + 0.5));
    return;
  }
  const auto end = Clock::now() + std::chrono::nanoseconds(ns);
  while (Clock::now() < end) {
  }
}

unsigned char pattern(std::size_t i, unsigned seed) {
  return static_cast<unsigned char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

// A file as large as the largest copy, written with the pattern, so its pages are in the page
// cache; each file_cached copy maps it afresh.
struct CachedFile {
  int fd = -1;
  std::size_t bytes = 0;
};

CachedFile make_cached_file(std::size_t bytes) {
  char path[] = "/tmp/cmt-replay-XXXXXX";
  CachedFile f;
  f.fd = mkstemp(path);
  if (f.fd < 0) return f;
  unlink(path);
  std::vector<unsigned char> block(1 << 20);
  for (std::size_t at = 0; at < bytes; at += block.size()) {
    const std::size_t n = std::min(block.size(), bytes - at);
    for (std::size_t i = 0; i < n; ++i) block[i] = pattern(at + i, 1);
    if (write(f.fd, block.data(), n) != static_cast<ssize_t>(n)) {
      close(f.fd);
      return CachedFile{};
    }
  }
  f.bytes = bytes;
  return f;
}

// The host side of one copy in `mode`: its memory, and how to let it go (a mapping to unmap).
struct HostSide {
  unsigned char* p = nullptr;
  std::size_t unmap = 0;
};

HostSide host_side(ReplayThread& t, const Copy& c, Mode mode, const CachedFile& file) {
  if (mode == Mode::Pinned || c.host == "pinned") return {t.pinned, 0};
  if (c.buffer >= 0) return {(*t.buffers)[static_cast<std::size_t>(c.buffer)], 0};
  if (c.host == "file_cached" && c.to_device && file.fd >= 0) {
    void* m = mmap(nullptr, c.bytes, PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (m != MAP_FAILED) return {static_cast<unsigned char*>(m), c.bytes};
  }
  if (c.host == "fresh") {
    void* m = mmap(nullptr, c.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) return {static_cast<unsigned char*>(m), c.bytes};
  }
  unsigned char* resident = t.resident + (c.to_device ? 0 : t.most + kSpread);
  if (c.spread) resident += t.spread++ % cmt::replay::kSpreadPlaces * cmt::replay::kSpreadStep;
  return {resident, 0};
}

}  // namespace

namespace {

unsigned char* host_memory(std::size_t bytes) {
  auto* p = static_cast<unsigned char*>(std::malloc(bytes));
  if (!p) {
    std::fprintf(stderr, "cmt-bench-replay: no memory for %zu bytes\n", bytes);
    std::exit(1);
  }
  return p;
}

// Host memory of the thread, made once: its resident source (written), its resident destination
// (touched), its pinned buffer (written), and its device buffer.
void prepare(ReplayThread& t, unsigned seed) {
  const std::size_t side = t.most + kSpread;
  t.resident = host_memory(2 * side);
  for (std::size_t i = 0; i < side; ++i) t.resident[i] = pattern(i, 2 + seed);
  std::memset(t.resident + side, 0, side);
  CMT_CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&t.pinned), t.most, 0));
  for (std::size_t i = 0; i < t.most; ++i) t.pinned[i] = pattern(i, 3 + seed);
  CMT_CHECK_CUDA(cudaMalloc(&t.device, t.most));
  CMT_CHECK_CUDA(cudaMemcpy(t.device, t.pinned, t.most, cudaMemcpyHostToDevice));
  CMT_CHECK_CUDA(cudaStreamCreateWithFlags(&t.stream, cudaStreamNonBlocking));
}

// The copy, and the program's wait after it where it made one (Copy::wait_after); `check` waits
// in any case, since the bytes are read back through another stream.
void copy(const ReplayThread& t, const Copy& c, unsigned char* host, bool check) {
  void* dst = c.to_device ? t.device : static_cast<void*>(host);
  const void* src = c.to_device ? static_cast<const void*>(host) : t.device;
  const cudaMemcpyKind kind = c.to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  if (c.synchronous) {
    CMT_CHECK_CUDA(cudaMemcpy(dst, src, c.bytes, kind));
  } else {
    CMT_CHECK_CUDA(cudaMemcpyAsync(dst, src, c.bytes, kind, t.stream));
    if (c.wait_after || check) CMT_CHECK_CUDA(cudaStreamSynchronize(t.stream));
  }
}

// The device's bytes, read back through CUDA's own path, against the host side of the copy just
// made; the number of bytes that differ.
std::size_t wrong_bytes(const ReplayThread& t, const Copy& c, const unsigned char* host,
                        ForwardFn forward, std::vector<unsigned char>* scratch) {
  scratch->resize(c.bytes);
  const int was = forward ? forward(1) : 0;
  CMT_CHECK_CUDA(cudaMemcpy(scratch->data(), t.device, c.bytes, cudaMemcpyDeviceToHost));
  if (forward) forward(was);
  // Compared a megabyte at a time, the bytes counted only where one differs: a trace of tens of
  // gigabytes is checked at memcmp's rate.
  std::size_t wrong = 0;
  for (std::size_t at = 0; at < c.bytes; at += 1 << 20) {
    const std::size_t n = std::min<std::size_t>(1 << 20, c.bytes - at);
    if (std::memcmp(scratch->data() + at, host + at, n) == 0) continue;
    for (std::size_t i = at; i < at + n; ++i) wrong += (*scratch)[i] != host[i];
  }
  return wrong;
}

struct Round {
  double seconds = 0;
  std::size_t wrong = 0;  // bytes, in a checked round
};

// One replay thread's copies in `mode`; with `check`, every copy's bytes are compared.
std::size_t replay_thread(ReplayThread& t, Mode mode, const CachedFile& file, ForwardFn forward,
                          const GpuWork& gpu, bool check) {
  if (forward) forward(mode == Mode::Default ? 1 : 0);
  std::vector<unsigned char> scratch;
  std::size_t wrong = 0;
  for (const Copy& c : t.copies) {
    // The stream the copy goes on (copy()): a synchronous one, the legacy default stream.
    if (gpu.kernel && c.gpu_gap_ns > 0)
      busy(gpu, c.synchronous ? cudaStreamLegacy : t.stream,
           static_cast<std::uint64_t>(c.gpu_gap_ns));
    work_for(t.work, c.gap_ns);
    HostSide side = host_side(t, c, mode, file);
    if (check && !c.to_device && !side.unmap) std::memset(side.p, 0xa5, c.bytes);
    copy(t, c, side.p, check);
    if (check) wrong += wrong_bytes(t, c, side.p, forward, &scratch);
    if (side.unmap) munmap(side.p, side.unmap);
  }
  CMT_CHECK_CUDA(cudaStreamSynchronize(t.stream));  // the round ends when its last copy has
  if (forward) forward(0);
  return wrong;
}

Round run_round(std::vector<ReplayThread>& ts, Mode mode, const CachedFile& file, ForwardFn forward,
                const GpuWork& gpu, bool check, int device) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<std::size_t> wrong{0};
  std::vector<std::thread> workers;
  for (ReplayThread& t : ts)
    workers.emplace_back([&, tp = &t] {
      CMT_CHECK_CUDA(cudaSetDevice(device));
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      wrong.fetch_add(replay_thread(*tp, mode, file, forward, gpu, check));
    });
  while (ready.load() < static_cast<int>(ts.size())) std::this_thread::yield();
  const auto t0 = Clock::now();
  go.store(true);
  for (std::thread& w : workers) w.join();
  Round r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.wrong = wrong.load();
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

namespace {

struct Options {
  std::string trace;
  int rounds = 3;
  std::vector<std::string> modes = {"default", "cmt", "pinned"};
  std::string json;
  double gap_scale = 1.0;
  bool gpu_work = true;           // --gpu-work: the streams' recorded work between copies
  bool gap_work = false;          // --gap-work: the CPU gaps as time, or as work of a fixed size
  double from_s = 0, to_s = 1e9;  // --window: seconds from the trace's first call
};

// "START:END" in seconds, END after START; false if it is not.
bool parse_window(const std::string& text, double* from, double* to) {
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  try {
    std::size_t a = 0, b = 0;
    *from = std::stod(text.substr(0, colon), &a);
    *to = std::stod(text.substr(colon + 1), &b);
    return a == colon && b == text.size() - colon - 1 && *from >= 0 && *to > *from;
  } catch (...) {
    return false;
  }
}

int parse(int argc, char** argv, Options* o) {
  CLI::App app{
      "Replay a recorded trace (cmt run --record): the same copies, sizes, host memory "
      "and gaps, CUDA's default path against cmt against pinned, in one process",
      "cmt bench replay"};
  app.add_option("FILE", o->trace, "The trace")->required()->check(CLI::ExistingFile);
  app.add_option("--rounds", o->rounds, "Timed rounds of each mode, alternating")
      ->check(CLI::Range(1, 100));
  app.add_option("--modes", o->modes, "Which of default, cmt, pinned")
      ->delimiter(',')
      ->check(CLI::IsMember({"default", "cmt", "pinned"}));
  app.add_option("--json", o->json, "Write the results here as JSON");
  app.add_option("--gap-scale", o->gap_scale,
                 "The recorded gaps (CPU work, and GPU work on the copies' streams) times this: "
                 "0 replays the copies back to back")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option_function<std::string>(
         "--gap-work", [o](const std::string& v) { o->gap_work = v == "work"; },
         "The recorded CPU work between copies as a busy loop of the recorded length (time, the "
         "default), or as work of a fixed size, the amount that takes the recorded time on this "
         "machine with nothing beside it (work: what slows a program's own work beside cmt "
         "slows it too; it overstated that slowdown on its one GPU run)")
      ->check(CLI::IsMember({"work", "time"}))
      ->type_name("work|time");
  app.add_option_function<std::string>(
         "--gpu-work", [o](const std::string& v) { o->gpu_work = v == "on"; },
         "Replay the GPU work the trace (version 5) says each copy's stream did since the copy "
         "before it, as a kernel that keeps the stream busy that long (on, the default), or leave "
         "the streams idle between copies (off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->type_name("on|off");
  app.add_option_function<std::string>(
         "--window",
         [o](const std::string& text) {
           if (!parse_window(text, &o->from_s, &o->to_s))
             throw CLI::ValidationError("--window", "'" + text +
                                                        "': expected START:END, seconds from the "
                                                        "trace's first call, END after START");
         },
         "Replay only the copies that started in this window of the trace (START:END, seconds "
         "from its first call), e.g. one load of several")
      ->type_name("START:END");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return -1;
}

Mode mode_of(const std::string& name) {
  return name == "default" ? Mode::Default : name == "cmt" ? Mode::Cmt : Mode::Pinned;
}

std::string fixed(double v) {
  char out[32];
  std::snprintf(out, sizeof out, "%.2f", v);
  return out;
}

// What the replay made of the program's host buffers (replay_plan.h).
std::string buffers_line(const cmt::Trace& trace, const cmt::replay::Plan& plan) {
  if (!trace.host_addresses)
    return "  host buffers: not recorded (a trace before version 4): each thread's resident copies "
           "from one buffer\n";
  std::size_t again = 0, bytes = 0;
  for (const cmt::replay::Thread& t : plan.threads)
    for (const Copy& c : t.copies) again += c.buffer >= 0;
  for (std::size_t b : plan.buffers) bytes += b;
  return "  host buffers: " + std::to_string(plan.buffers.size()) + " the program copied again (" +
         std::to_string(bytes) + " bytes), each replayed from its own, " + std::to_string(again) +
         " copies from them\n";
}

// What the replay does on the GPU between copies: the recorded streams' work, or why not.
// Where the replay waits for the GPU: after the copies the program waited for (trace version 6),
// or after every copy.
std::string waits_line(const std::vector<ReplayThread>& ts, bool recorded) {
  if (!recorded) return "  waits: not in the trace (one before version 6): each copy waited for\n";
  std::size_t waited = 0, copies = 0;
  for (const ReplayThread& t : ts)
    for (const Copy& c : t.copies) ++copies, waited += c.wait_after || c.synchronous;
  return "  waits: the program waited for the GPU after " + std::to_string(waited) + " of " +
         std::to_string(copies) + " copies (synchronous ones included), the replay there too\n";
}

std::string gpu_work_line(const std::vector<ReplayThread>& ts, const GpuWork& gpu,
                          const std::string& why_not) {
  std::size_t gaps = 0;
  std::uint64_t ns = 0;
  for (const ReplayThread& t : ts)
    for (const Copy& c : t.copies)
      if (c.gpu_gap_ns >= 0) ++gaps, ns += static_cast<std::uint64_t>(c.gpu_gap_ns);
  if (!gaps)
    return "  GPU work between copies: not in the trace (one before version 5): streams idle\n";
  return "  GPU work between copies: " + std::to_string(ns / 1000000) + " ms on the streams (" +
         std::to_string(gaps) + " gaps), " +
         (gpu.kernel ? std::string("replayed as kernels that wait")
                     : "not replayed (" + why_not + ")") +
         "\n";
}

std::string report(const Options& o, const std::vector<ReplayThread>& ts, std::uint64_t bytes,
                   const std::string& buffers,
                   const std::map<std::string, std::vector<double>>& runs,
                   const std::map<std::string, std::size_t>& wrong) {
  std::size_t copies = 0;
  std::uint64_t gaps = 0;
  for (const ReplayThread& t : ts)
    for (const Copy& c : t.copies) ++copies, gaps += c.gap_ns;
  std::string out =
      "cmt-bench-replay: " + o.trace + ": " + std::to_string(ts.size()) + " thread(s), " +
      std::to_string(copies) + " copies, " + std::to_string(bytes) +
      " bytes; CPU work between copies " + std::to_string(gaps / 1000000) + " ms in all threads" +
      (g_ns_per_unit > 0 ? ", as work of that size (" + fixed(g_ns_per_unit) + " ns a unit alone)"
                         : std::string(", as busy loops of that length")) +
      "\n" + buffers;
  const double base = runs.count("default") ? median(runs.at("default")) : 0;
  const double pinned = runs.count("pinned") ? median(runs.at("pinned")) : 0;
  for (const std::string& m : o.modes) {
    const std::vector<double>& v = runs.at(m);
    const double med = median(v), lo = *std::min_element(v.begin(), v.end()),
                 hi = *std::max_element(v.begin(), v.end());
    char line[200];
    std::snprintf(line, sizeof line, "  %-8s %.4f s a round (%.1f GB/s), spread %.0f%%", m.c_str(),
                  med, bytes / med / 1e9, 100 * (hi - lo) / med);
    out += line;
    if (base && m != "default") out += ", " + fixed(base / med) + "x default";
    if (pinned && m != "pinned") out += ", " + fixed(pinned / med) + " of pinned";
    out += "; checked round: " + std::to_string(wrong.at(m)) + " wrong bytes\n";
  }
  return out;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

std::string as_json(const Options& o, std::uint64_t bytes,
                    const std::map<std::string, std::vector<double>>& runs,
                    const std::map<std::string, std::size_t>& wrong) {
  std::string out =
      "{\n  \"benchmark\": \"cmt-bench-replay\",\n  \"trace\": " + json_string(o.trace) +
      ",\n  \"bytes\": " + std::to_string(bytes) + ",\n  \"modes\": {";
  bool first = true;
  for (const std::string& m : o.modes) {
    out += std::string(first ? "" : ",") + "\n    \"" + m +
           "\": {\"median_s\": " + std::to_string(median(runs.at(m))) + ", \"runs_s\": [";
    for (std::size_t i = 0; i < runs.at(m).size(); ++i)
      out += (i ? ", " : "") + std::to_string(runs.at(m)[i]);
    out += "], \"wrong_bytes\": " + std::to_string(wrong.at(m)) + "}";
    first = false;
  }
  return out + "\n  }\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int status = parse(argc, argv, &o); status >= 0) return status;
  cmt::Trace trace;
  std::string error;
  if (!cmt::read_trace_file(o.trace, &trace, &error)) {
    std::fprintf(stderr, "cmt-bench-replay: %s\n", error.c_str());
    return 2;
  }
  const cmt::replay::Plan plan =
      cmt::replay::plan_replay(trace, static_cast<std::uint64_t>(o.from_s * 1e9),
                               static_cast<std::uint64_t>(std::min(o.to_s, 1e9) * 1e9));
  const std::uint64_t bytes = plan.bytes;
  // The program's buffers it copied again, made once and written (they are sources as often as
  // destinations; a checked copy compares whatever they hold).
  std::vector<unsigned char*> buffers;
  for (std::size_t b = 0; b < plan.buffers.size(); ++b) {
    buffers.push_back(host_memory(plan.buffers[b]));
    for (std::size_t i = 0; i < plan.buffers[b]; ++i) buffers[b][i] = pattern(i, 5 + b);
  }
  std::vector<ReplayThread> ts;
  for (const cmt::replay::Thread& planned : plan.threads) {
    ReplayThread t;
    t.copies = planned.copies;
    t.most = planned.most;
    t.buffers = &buffers;
    for (Copy& c : t.copies) {
      c.gap_ns = static_cast<std::uint64_t>(c.gap_ns * o.gap_scale);
      if (c.gpu_gap_ns > 0) c.gpu_gap_ns = static_cast<std::int64_t>(c.gpu_gap_ns * o.gap_scale);
    }
    ts.push_back(std::move(t));
  }
  if (ts.empty()) {
    std::fprintf(stderr, "cmt-bench-replay: %s holds no host <-> device copy to replay%s\n",
                 o.trace.c_str(), o.from_s > 0 || o.to_s < 1e9 ? " in the window given" : "");
    return 2;
  }
  cmt::bench::ensure_preloaded(argv);
  auto forward = reinterpret_cast<ForwardFn>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread"));
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cmt-bench-replay: no CUDA GPU found\n");
    return 1;
  }
  std::size_t most = 0;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    prepare(ts[i], static_cast<unsigned>(i));
    most = std::max(most, ts[i].most);
  }
  const CachedFile file = make_cached_file(most);
  // The CPU gaps' work measured on this thread before any copy, with nothing beside it.
  if (o.gap_work) g_ns_per_unit = GapWork().ns_per_unit();
  std::string why_not = "--gpu-work off";
  const GpuWork gpu = o.gpu_work ? load_gpu_work(&why_not) : GpuWork{};
  std::map<std::string, std::vector<double>> runs;
  std::map<std::string, std::size_t> wrong;
  // The checked round first: it also warms each mode up (CUDA's and cmt's pinned buffers, cmt's
  // lanes and threads), which the timed rounds then do not pay.
  for (const std::string& m : o.modes)
    wrong[m] = run_round(ts, mode_of(m), file, forward, gpu, true, 0).wrong;
  for (int r = 0; r < o.rounds; ++r)
    for (const std::string& m : o.modes)
      runs[m].push_back(run_round(ts, mode_of(m), file, forward, gpu, false, 0).seconds);
  std::fputs(report(o, ts, bytes,
                    buffers_line(trace, plan) + gpu_work_line(ts, gpu, why_not) +
                        waits_line(ts, plan.waits_recorded),
                    runs, wrong)
                 .c_str(),
             stdout);
  std::string why;  // written as every file of cmt's: never through a planted link, never half
  if (!o.json.empty() && !cmt::write_output_file(o.json, as_json(o, bytes, runs, wrong), &why)) {
    std::fprintf(stderr, "cmt-bench-replay: cannot write '%s': %s\n", o.json.c_str(), why.c_str());
    return 1;
  }
  std::size_t all_wrong = 0;
  for (const auto& [m, w] : wrong) all_wrong += w;
  return all_wrong ? 1 : 0;
}
