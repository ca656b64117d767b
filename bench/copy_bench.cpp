// cmt-bench-copy: a plain CUDA program that times pageable cudaMemcpy three ways in one process:
//   default  - CUDA's own cudaMemcpy on pageable memory (looked up inside libcudart, past cmt)
//   cmt      - the same call through the cudaMemcpy symbol, which libcmt.so interposes
//   pinned   - CUDA's cudaMemcpy on a cudaMallocHost buffer: the ceiling
// Rounds alternate the three (in rotating order) so drift hits all alike; each copy is timed to
// completion (call + device synchronize), and the bytes are checked after every copy. If libcmt.so
// is not preloaded, the program re-executes itself with it (found beside this executable).
//
// Cases (--cases): "plain" reuses buffers whose pages are mapped; "fresh" copies device to host
// into memory mapped just before (every page faults, as tensor.cpu() does); "mmap" copies host to
// device from a file mapped just before, with the file in the page cache (as safetensors loads).
// In the last two, "pinned" is the plain pinned copy: the ceiling. --api batch makes each timed
// copy a cudaMemcpyBatchAsync of --batch-copies equal parts on a stream of its own, then a
// synchronize (how libcudf, KV-cache offloaders and kvikio copy). --gap-us idles before each
// timed copy, every mode alike: a program that computes between copies, whose threads (CUDA's
// and cmt's) have gone cold (with CMT_WAKE_AHEAD=0: gaps this regular let cmt's threads wake
// ahead of each copy); without it, copies follow each other within a millisecond or so.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_cli.h"
#include "bench_process.h"
#include "common/output_file.h"
#include "config/fingerprint.h"
#include "config/profile.h"
#include "cuda_check.h"

using cmt::bench::add_sizes;
using cmt::bench::ensure_preloaded;
using cmt::bench::object_of;
using cmt::bench::parse_command_line;
using cmt::bench::self_dir;

namespace {

using MemcpyFn = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind);

struct Options {
  std::vector<size_t> sizes = {4u << 10,   16u << 10, 64u << 10,           256u << 10,
                               1u << 20,   4u << 20,  16u << 20,           64u << 20,
                               256u << 20, 1u << 30,  std::size_t{4} << 30};
  int reps = 5;
  int gap_us = 0;  // idle before each timed copy
  int device = 0;
  std::string json, csv, plot;
  std::vector<std::string> cases = {"plain"};
  std::string file_dir = "/tmp";  // where the "mmap" case writes its file
  bool batch = false;             // --api batch: cudaMemcpyBatchAsync instead of cudaMemcpy
  int batch_copies = 1;
  bool batch_reverse = false;  // --batch-order reverse: the parts listed last to first
};

// A failure after the command line was read: says why and ends the program.
[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "cmt-bench-copy: %s\n", why.c_str());
  std::exit(1);
}

// The command line (cmt bench copy passes its arguments here untouched). Returns -1 to go on,
// else the status to exit with.
int parse(int argc, char** argv, Options* o) {
  CLI::App app{
      "Pageable host <-> GPU copies: CUDA's default path vs cmt vs pinned, one process, "
      "bytes checked",
      "cmt-bench-copy"};
  add_sizes(app, "--sizes", &o->sizes, "Copy sizes");
  app.add_option("--reps", o->reps, "Timed copies per size, mode and direction")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--device", o->device, "The GPU (CUDA ordinal)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1023));
  app.add_option("--cases", o->cases,
                 "plain; fresh (D2H into new pages, as tensor.cpu()); mmap (H2D from a file "
                 "mapped just before, in the page cache, as safetensors loads)")
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::IsMember({"plain", "fresh", "mmap"}));
  app.add_option("--file-dir", o->file_dir, "Where the mmap case writes its file")
      ->capture_default_str();
  app.add_option("--gap-us", o->gap_us,
                 "Idle this many microseconds before each timed copy, every mode alike, as a "
                 "program that computes between its copies (cmt's threads sleep after spin_us, " +
                     std::to_string(cmt::Config{}.spin_us) +
                     " by default; gaps this regular, longer than that, let them wake ahead of "
                     "each copy: CMT_WAKE_AHEAD=0 measures them cold)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000000));
  std::string api = "memcpy", order = "forward";
  app.add_option("--api", api,
                 "memcpy (cudaMemcpy), or batch: each copy one cudaMemcpyBatchAsync on a stream")
      ->capture_default_str()
      ->check(CLI::IsMember({"memcpy", "batch"}));
  app.add_option("--batch-copies", o->batch_copies,
                 "With --api batch: the parts of each copy, one batch entry each")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--batch-order", order,
                 "With --api batch: the parts in order (forward), or last to first (reverse), so "
                 "that none continues the one before it")
      ->capture_default_str()
      ->check(CLI::IsMember({"forward", "reverse"}));
  app.add_option("--json", o->json, "Write the results as JSON");
  app.add_option("--csv", o->csv, "Write the results as CSV");
  app.add_option("--plot", o->plot, "Draw GB/s against size as SVG (needs --json)");
  const int status = parse_command_line(app, argc, argv);
  o->batch = api == "batch";
  o->batch_reverse = order == "reverse";
  if (status < 0 && !o->plot.empty() && o->json.empty()) {
    std::fprintf(stderr, "cmt-bench-copy: --plot needs --json (the plot is drawn from it)\n");
    return 2;
  }
  return status;
}

// libcmt.so's switch for this thread: CUDA's own cudaMemcpy reaches the driver through
// cuMemcpy* entry points that cmt also hooks, so the default path is timed with it on.
int (*g_forward_this_thread)(int) = nullptr;

// --api batch: the copy as one cudaMemcpyBatchAsync of `g_batch_copies` equal parts (the last
// takes the remainder) on g_batch_stream, source read in stream order, then a synchronize.
int g_batch_copies = 1;
bool g_batch_reverse = false;  // parts last to first: none continues the one before it
cudaStream_t g_batch_stream = nullptr;

cudaError_t batch_copy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  const size_t count = std::min<size_t>(g_batch_copies, n);
  std::vector<void*> dsts(count);
  std::vector<const void*> srcs(count);
  std::vector<size_t> sizes(count, n / count);
  sizes.back() += n % count;
  for (size_t i = 0, at = 0; i < count; at += sizes[i], ++i) {
    dsts[i] = static_cast<char*>(d) + at;
    srcs[i] = static_cast<const char*>(s) + at;
  }
  if (g_batch_reverse) {
    std::reverse(dsts.begin(), dsts.end());
    std::reverse(srcs.begin(), srcs.end());
    std::reverse(sizes.begin(), sizes.end());
  }
  cudaMemcpyAttributes attrs{};
  attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t first = 0;
  cudaError_t e = cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), count, &attrs,
                                       &first, 1, g_batch_stream);
  return e != cudaSuccess ? e : cudaStreamSynchronize(g_batch_stream);
}

// CUDA's own cudaMemcpy, looked up in the libcudart that this program loaded, past any preload.
MemcpyFn cuda_own_memcpy() {
  std::string cudart = object_of(reinterpret_cast<const void*>(&cudaGetDeviceCount));
  void* h = dlopen(cudart.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!h) fail("cannot reopen " + cudart);
  auto fn = reinterpret_cast<MemcpyFn>(dlsym(h, "cudaMemcpy"));
  if (!fn) fail("libcudart has no cudaMemcpy");
  return fn;
}

std::string read_first(const char* path, const char* key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      auto p = line.find(':');
      std::string v = p == std::string::npos ? line : line.substr(p + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return "?";
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

// The configuration as one line: "CMT_THREADS=0 CMT_CHUNK_BYTES=2M ...".
std::string describe_line(const cmt::Config& config) {
  std::string text = cmt::describe(config), out;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    std::string line = text.substr(at, end - at);
    out += (out.empty() ? "" : " ") + line.substr(0, line.find("  ("));
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

struct Sample {
  std::vector<double> gbps;
  double median() const {
    std::vector<double> v = gbps;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
  double lo() const { return *std::min_element(gbps.begin(), gbps.end()); }
  double hi() const { return *std::max_element(gbps.begin(), gbps.end()); }
};

const char* kModes[] = {"default", "cmt", "pinned"};

// The three ways each copy is made: CUDA's own path (its cudaMemcpy, or its batch, with every cmt
// hook stepping aside on this thread), cmt's (the interposed symbol), and the same call CUDA's
// way for pinned memory. `setup` is CUDA's own cudaMemcpy, for the untimed set-up copies.
struct CopyPaths {
  MemcpyFn setup, timed_default, cmt;
};

MemcpyFn g_cuda_own = nullptr;  // cudart's cudaMemcpy, past any preload

CopyPaths copy_paths(const Options& opt) {
  g_cuda_own = cuda_own_memcpy();
  g_forward_this_thread =
      reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread"));
  if (!g_forward_this_thread) fail("libcmt.so has no cmt_forward_this_thread");
  CopyPaths paths;
  paths.setup = [](void* d, const void* s, size_t n, cudaMemcpyKind k) {
    int was = g_forward_this_thread(1);
    cudaError_t e = g_cuda_own(d, s, n, k);
    g_forward_this_thread(was);
    return e;
  };
  paths.timed_default = paths.setup;
  paths.cmt = &cudaMemcpy;
  // The batch API has no runtime hook: cudart's batch reaches cmt's hook of cuMemcpyBatchAsync.
  if (opt.batch) {
    g_batch_copies = opt.batch_copies;
    g_batch_reverse = opt.batch_reverse;
    CMT_CHECK_CUDA(cudaStreamCreateWithFlags(&g_batch_stream, cudaStreamNonBlocking));
    paths.cmt = &batch_copy;
    paths.timed_default = [](void* d, const void* s, size_t n, cudaMemcpyKind k) {
      int was = g_forward_this_thread(1);
      cudaError_t e = batch_copy(d, s, n, k);
      g_forward_this_thread(was);
      return e;
    };
  }
  return paths;
}

// What the results are labelled with.
struct Machine {
  cudaDeviceProp prop{};
  int driver = 0;
  std::string host, date, cpu;
  long cores = 0;
};

Machine describe_machine(const Options& opt) {
  Machine m;
  CMT_CHECK_CUDA(cudaGetDeviceProperties(&m.prop, opt.device));
  cudaDriverGetVersion(&m.driver);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  m.host = host;
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  m.date = date;
  m.cpu = read_first("/proc/cpuinfo", "model name");
  m.cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::printf("cmt-bench-copy  %s  GPU %d: %s  CPU: %s (%ld cores)  driver %d\n", date, opt.device,
              m.prop.name, m.cpu.c_str(), m.cores, m.driver);
  std::printf("cudaMemcpy symbol from %s; default path from %s\n",
              object_of(reinterpret_cast<const void*>(&cudaMemcpy)).c_str(),
              object_of(reinterpret_cast<const void*>(&cudaGetDeviceCount)).c_str());
  int hmm = 0;  // the GPU reads pageable memory itself (HMM): CUDA may copy it without staging
  cudaDeviceGetAttribute(&hmm, cudaDevAttrPageableMemoryAccess, opt.device);
  std::printf("pageable memory access by the GPU: %s\n", hmm ? "yes" : "no");
  if (opt.batch)
    std::printf(
        "timed copies: cudaMemcpyBatchAsync of %d part(s) on a stream, then a synchronize\n",
        opt.batch_copies);
  return m;
}

// The user's pageable buffers, touched once so page faults stay out of the figures (the fresh
// case makes its own), pinned ones with the same bytes, the device buffer, and for the mmap case
// a file written once, so it sits in the page cache.
struct Buffers {
  unsigned char *pageable = nullptr, *pageable_out = nullptr, *pinned = nullptr, *check = nullptr;
  void* dev = nullptr;
  int file_fd = -1;
};

Buffers make_buffers(const Options& opt) {
  const size_t max_bytes = *std::max_element(opt.sizes.begin(), opt.sizes.end());
  Buffers b;
  b.pageable = static_cast<unsigned char*>(std::malloc(max_bytes));
  b.pageable_out = static_cast<unsigned char*>(std::malloc(max_bytes));
  if (!b.pageable || !b.pageable_out) fail("out of host memory");
  CMT_CHECK_CUDA(cudaMallocHost(&b.pinned, max_bytes));
  CMT_CHECK_CUDA(cudaMallocHost(&b.check, max_bytes));
  CMT_CHECK_CUDA(cudaMalloc(&b.dev, max_bytes));
  for (size_t i = 0; i < max_bytes; ++i) b.pageable[i] = static_cast<unsigned char>(i * 131 + 7);
  std::memcpy(b.pinned, b.pageable, max_bytes);
  std::memset(b.pageable_out, 0, max_bytes);
  if (std::find(opt.cases.begin(), opt.cases.end(), "mmap") != opt.cases.end()) {
    const std::string path = opt.file_dir + "/cmt-bench-copy-" + std::to_string(getpid()) + ".bin";
    b.file_fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_EXCL | O_NOFOLLOW, 0600);
    if (b.file_fd < 0 || write(b.file_fd, b.pageable, max_bytes) != static_cast<ssize_t>(max_bytes))
      fail("cannot write " + path + " for the mmap case (see --file-dir)");
    unlink(path.c_str());  // gone when the process ends; the descriptor keeps it
  }
  return b;
}

struct Row {
  std::string kind;
  size_t bytes;
  const char* dir;
  Sample s[3];  // kModes
};

// One timed copy of `mode` (kModes), its bytes checked; adds its rate to `row` unless warming up.
void time_one(const Options& opt, const CopyPaths& paths, Buffers& b, int mode, bool warm_up,
              Row& row, long* wrong) {
  const bool h2d = row.dir[0] == 'h';
  const size_t bytes = row.bytes;
  unsigned char* hostbuf = mode == 2 ? b.pinned : (h2d ? b.pageable : b.pageable_out);
  MemcpyFn fn = mode == 1 ? paths.cmt : paths.timed_default;
  if (!h2d) {
    CMT_CHECK_CUDA(paths.setup(b.dev, b.pinned, bytes, cudaMemcpyHostToDevice));  // known bytes
    CMT_CHECK_CUDA(cudaDeviceSynchronize());
    if (mode != 2) std::memset(hostbuf, 0, bytes);  // (its pages stay mapped)
  } else {
    CMT_CHECK_CUDA(cudaMemset(b.dev, 0, bytes));
    CMT_CHECK_CUDA(cudaDeviceSynchronize());
  }
  // A program that computes between its copies: CUDA's path and cmt's threads both start cold.
  if (opt.gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(opt.gap_us));
  auto t0 = std::chrono::steady_clock::now();
  void* mapped = nullptr;  // this round's fresh mapping, if any (counted in the time)
  if (mode != 2 && row.kind == "fresh") {
    mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) fail("out of memory for a fresh buffer");
    hostbuf = static_cast<unsigned char*>(mapped);
  } else if (mode != 2 && row.kind == "mmap") {
    mapped = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, b.file_fd, 0);
    if (mapped == MAP_FAILED) fail("cannot map the file");
    hostbuf = static_cast<unsigned char*>(mapped);
  }
  if (h2d)
    CMT_CHECK_CUDA(fn(b.dev, hostbuf, bytes, cudaMemcpyHostToDevice));
  else
    CMT_CHECK_CUDA(fn(hostbuf, b.dev, bytes, cudaMemcpyDeviceToHost));
  CMT_CHECK_CUDA(cudaDeviceSynchronize());
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!warm_up) row.s[mode].gbps.push_back(bytes / s / 1e9);
  // Every copy's bytes are checked.
  if (h2d) {
    CMT_CHECK_CUDA(paths.setup(b.check, b.dev, bytes, cudaMemcpyDeviceToHost));
    if (std::memcmp(b.check, b.pageable, bytes) != 0) ++*wrong;
  } else if (std::memcmp(hostbuf, b.pinned, bytes) != 0) {
    ++*wrong;
  }
  if (mapped) munmap(mapped, bytes);
}

// One row: the three modes in rounds, which mode goes first rotating, after a warm-up round.
Row measure_row(const Options& opt, const CopyPaths& paths, Buffers& b, const std::string& kind,
                size_t bytes, bool h2d, long* wrong) {
  Row row{kind, bytes, h2d ? "h2d" : "d2h", {}};
  for (int rep = -1; rep < opt.reps; ++rep)
    for (int k = 0; k < 3; ++k) time_one(opt, paths, b, (k + rep + 3) % 3, rep < 0, row, wrong);
  const Row& r = row;
  std::printf(
      "%5s %10zu %s  default %6.2f [%6.2f-%6.2f]  cmt %6.2f [%6.2f-%6.2f]  pinned %6.2f "
      "[%6.2f-%6.2f] GB/s  cmt/default %5.2fx  cmt/pinned %4.2f\n",
      r.kind.c_str(), bytes, r.dir, r.s[0].median(), r.s[0].lo(), r.s[0].hi(), r.s[1].median(),
      r.s[1].lo(), r.s[1].hi(), r.s[2].median(), r.s[2].lo(), r.s[2].hi(),
      r.s[1].median() / r.s[0].median(), r.s[1].median() / r.s[2].median());
  std::fflush(stdout);
  return row;
}

// The results as JSON: the machine, the configuration libcmt.so runs with here (through the same
// loader), the command, the CMT_* variables, and each row's three modes.
void write_json(const Options& opt, const Machine& m, const std::vector<Row>& rows, long wrong,
                int argc, char** argv) {
  cmt::OutputFile out(opt.json);
  std::FILE* f = out.stream();
  if (!f) fail("cannot write " + opt.json + ": " + out.why());
  std::string cmdline;
  for (int i = 0; i < argc; ++i) cmdline += std::string(i ? " " : "") + argv[i];
  const cmt::MachineFingerprint machine = cmt::read_fingerprint();
  const cmt::LoadedConfiguration loaded = cmt::load_configuration("", machine);
  const std::string profile_used = !loaded.config.profile.empty()    ? loaded.config.profile
                                   : !loaded.machine_profile.empty() ? loaded.machine_profile
                                                                     : loaded.shared_profile;
  std::fprintf(f,
               "{\n  \"benchmark\": \"cmt-bench-copy\",\n  \"cmt_version\": \"%s\",\n  "
               "\"fingerprint\": \"%s\",\n  \"profile\": \"%s\",\n  \"cmt_config\": \"%s\",\n",
               CMT_VERSION, json_escape(machine.key()).c_str(), json_escape(profile_used).c_str(),
               json_escape(describe_line(loaded.config)).c_str());
  std::fprintf(f,
               "  \"date\": \"%s\",\n  \"command\": "
               "\"%s\",\n  \"machine\": {\"host\": \"%s\", \"cpu\": \"%s\", \"cores\": %ld, "
               "\"gpu\": \"%s\", \"pci_bus\": \"%04x:%02x:%02x\", \"driver\": %d},\n  "
               "\"api\": \"%s\",\n  \"batch_copies\": %d,\n  \"batch_order\": \"%s\",\n  "
               "\"reps\": %d,\n  \"gap_us\": %d,\n  \"wrong_copies\": %ld,\n  \"env\": {",
               m.date.c_str(), json_escape(cmdline).c_str(), json_escape(m.host).c_str(),
               json_escape(m.cpu).c_str(), m.cores, json_escape(m.prop.name).c_str(),
               m.prop.pciDomainID, m.prop.pciBusID, m.prop.pciDeviceID, m.driver,
               opt.batch ? "batch" : "memcpy", opt.batch ? opt.batch_copies : 0,
               opt.batch_reverse ? "reverse" : "forward", opt.reps, opt.gap_us, wrong);
  bool first = true;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "CMT_", 4) == 0 && std::strncmp(*e, "CMT_BENCH", 9) != 0) {
      std::string kv = *e;
      auto eq = kv.find('=');
      std::fprintf(f, "%s\"%s\": \"%s\"", first ? "" : ", ", json_escape(kv.substr(0, eq)).c_str(),
                   json_escape(kv.substr(eq + 1)).c_str());
      first = false;
    }
  std::fprintf(f, "},\n  \"results\": [\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f, "    {\"case\": \"%s\", \"bytes\": %zu, \"direction\": \"%s\"", r.kind.c_str(),
                 r.bytes, r.dir);
    for (int k = 0; k < 3; ++k)
      std::fprintf(f, ", \"%s\": {\"median_gbps\": %.3f, \"min_gbps\": %.3f, \"max_gbps\": %.3f}",
                   kModes[k], r.s[k].median(), r.s[k].lo(), r.s[k].hi());
    std::fprintf(f, ", \"cmt_over_default\": %.3f, \"cmt_over_pinned\": %.3f}%s\n",
                 r.s[1].median() / r.s[0].median(), r.s[1].median() / r.s[2].median(),
                 i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  if (!out.commit()) fail("cannot write " + opt.json + ": " + out.why());
}

void write_csv(const std::string& path, const std::vector<Row>& rows) {
  cmt::OutputFile out(path);
  std::FILE* f = out.stream();
  if (!f) fail("cannot write " + path + ": " + out.why());
  std::fprintf(f, "case,bytes,direction");
  for (const char* m : kModes) std::fprintf(f, ",%s_median_gbps,%s_min_gbps,%s_max_gbps", m, m, m);
  std::fprintf(f, ",cmt_over_default,cmt_over_pinned\n");
  for (const Row& r : rows) {
    std::fprintf(f, "%s,%zu,%s", r.kind.c_str(), r.bytes, r.dir);
    for (int m = 0; m < 3; ++m)
      std::fprintf(f, ",%.3f,%.3f,%.3f", r.s[m].median(), r.s[m].lo(), r.s[m].hi());
    std::fprintf(f, ",%.3f,%.3f\n", r.s[1].median() / r.s[0].median(),
                 r.s[1].median() / r.s[2].median());
  }
  if (!out.commit()) fail("cannot write " + path + ": " + out.why());
}

// bench/plot.py draws the SVG from the JSON (beside this program's source tree, or installed with
// it); no plotting library needed.
void draw_plot(const Options& opt) {
  std::string dir = self_dir();
  std::string script;
  for (const char* rel : {"/../bench/plot.py", "/../../share/cmt/plot.py"})
    if (access((dir + rel).c_str(), R_OK) == 0) script = dir + rel;
  if (script.empty()) fail("bench/plot.py not found for --plot");
  std::string cmd = "python3 '" + script + "' '" + opt.json + "' '" + opt.plot + "'";
  if (std::system(cmd.c_str()) != 0) fail("drawing the plot failed: " + cmd);
  std::printf("plot: %s\n", opt.plot.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (int status = parse(argc, argv, &opt); status >= 0) return status;
  ensure_preloaded(argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) fail("no CUDA GPU found");
  if (opt.device >= devices) {
    std::fprintf(stderr, "cmt-bench-copy: --device %d: this machine has %d GPU(s)\n", opt.device,
                 devices);
    return 2;
  }
  CMT_CHECK_CUDA(cudaSetDevice(opt.device));
  const CopyPaths paths = copy_paths(opt);
  const Machine machine = describe_machine(opt);
  Buffers buffers = make_buffers(opt);
  std::vector<Row> rows;
  long wrong = 0;
  for (const std::string& kind : opt.cases)
    for (size_t bytes : opt.sizes)
      for (bool h2d : {true, false})
        if (!(kind == "fresh" && h2d) && !(kind == "mmap" && !h2d))
          rows.push_back(measure_row(opt, paths, buffers, kind, bytes, h2d, &wrong));
  if (buffers.file_fd >= 0) close(buffers.file_fd);
  if (wrong) std::printf("WRONG BYTES in %ld copies\n", wrong);
  if (!opt.json.empty()) write_json(opt, machine, rows, wrong, argc, argv);
  if (!opt.csv.empty()) write_csv(opt.csv, rows);
  if (!opt.plot.empty()) draw_plot(opt);
  return wrong ? 1 : 0;
}
