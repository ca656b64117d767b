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
// and cmt's) have gone cold; without it, copies follow each other within a millisecond or so.
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

#include "bench_process.h"
#include "config/fingerprint.h"
#include "config/profile.h"
#include "cuda_check.h"

using cmt::bench::ensure_preloaded;
using cmt::bench::object_of;
using cmt::bench::self_dir;

namespace {

using MemcpyFn = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind);

struct Options {
  std::vector<size_t> sizes = {256u << 10, 1u << 20,   4u << 20, 16u << 20,
                               64u << 20,  256u << 20, 1u << 30};
  int reps = 10;
  int gap_us = 0;  // idle before each timed copy
  int device = 0;
  std::string json, csv, plot;
  std::vector<std::string> cases = {"plain"};
  std::string file_dir = "/tmp";  // where the "mmap" case writes its file
  bool batch = false;             // --api batch: cudaMemcpyBatchAsync instead of cudaMemcpy
  int batch_copies = 1;
  bool batch_reverse = false;  // --batch-order reverse: the parts listed last to first
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "cmt-bench-copy: %s\nusage: cmt-bench-copy [--sizes 1M,64M,1G] [--reps N] [--gap-us N] "
      "[--device N] [--cases plain,fresh,mmap] [--file-dir DIR] [--api memcpy|batch] "
      "[--batch-copies N] [--batch-order forward|reverse] [--json FILE] [--csv FILE] [--plot "
      "FILE.svg]\n",
      why);
  std::exit(2);
}

size_t parse_size(const std::string& s) {
  std::size_t v = 0;
  if (!cmt::parse_byte_size(s, &v))
    usage(("bad size '" + s + "' (expected a size such as 64M)").c_str());
  if (v == 0) usage("sizes must be positive");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--sizes") {
      o.sizes.clear();
      std::string list = value(), item;
      for (size_t p = 0; p <= list.size(); ++p) {
        if (p == list.size() || list[p] == ',') {
          o.sizes.push_back(parse_size(item));
          item.clear();
        } else {
          item += list[p];
        }
      }
    } else if (a == "--reps") {
      o.reps = std::atoi(value().c_str());
      if (o.reps < 1) usage("--reps must be at least 1");
    } else if (a == "--gap-us") {
      o.gap_us = std::atoi(value().c_str());
      if (o.gap_us < 0) usage("--gap-us must be 0 or more");
    } else if (a == "--device") {
      o.device = std::atoi(value().c_str());
    } else if (a == "--json") {
      o.json = value();
    } else if (a == "--csv") {
      o.csv = value();
    } else if (a == "--plot") {
      o.plot = value();
    } else if (a == "--file-dir") {
      o.file_dir = value();
    } else if (a == "--api") {
      std::string api = value();
      if (api != "memcpy" && api != "batch")
        usage(("unknown --api '" + api + "' (expected memcpy or batch)").c_str());
      o.batch = api == "batch";
    } else if (a == "--batch-copies") {
      o.batch_copies = std::atoi(value().c_str());
      if (o.batch_copies < 1 || o.batch_copies > 4096) usage("--batch-copies must be 1 to 4096");
    } else if (a == "--batch-order") {
      std::string order = value();
      if (order != "forward" && order != "reverse")
        usage(("unknown --batch-order '" + order + "' (expected forward or reverse)").c_str());
      o.batch_reverse = order == "reverse";
    } else if (a == "--cases") {
      o.cases.clear();
      std::string list = value() + ",", item;
      for (char c : list) {
        if (c != ',') {
          item += c;
          continue;
        }
        if (item != "plain" && item != "fresh" && item != "mmap")
          usage(("unknown case '" + item + "' (expected plain, fresh or mmap)").c_str());
        o.cases.push_back(item);
        item.clear();
      }
    } else {
      usage(("unknown argument '" + a + "'").c_str());
    }
  }
  return o;
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
  if (!h) usage(("cannot reopen " + cudart).c_str());
  auto fn = reinterpret_cast<MemcpyFn>(dlsym(h, "cudaMemcpy"));
  if (!fn) usage("libcudart has no cudaMemcpy");
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

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse(argc, argv);
  ensure_preloaded(argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cmt-bench-copy: no CUDA GPU found\n");
    return 1;
  }
  if (opt.device < 0 || opt.device >= devices) usage("--device out of range");
  CMT_CHECK_CUDA(cudaSetDevice(opt.device));
  MemcpyFn cuda_own = cuda_own_memcpy();
  g_forward_this_thread =
      reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread"));
  if (!g_forward_this_thread) usage("libcmt.so has no cmt_forward_this_thread");
  // CUDA's own path: cudart's cudaMemcpy with every cmt hook stepping aside on this thread.
  static MemcpyFn cuda_own_static = cuda_own;
  MemcpyFn cuda_memcpy = [](void* d, const void* s, size_t n, cudaMemcpyKind k) {
    int was = g_forward_this_thread(1);
    cudaError_t e = cuda_own_static(d, s, n, k);
    g_forward_this_thread(was);
    return e;
  };
  MemcpyFn cmt_memcpy = &cudaMemcpy;
  // The timed default and pinned copies: the same API as cmt's, with cmt stepping aside. (The
  // batch API has no runtime hook: cudart's reaches cmt's hook of cuMemcpyBatchAsync.)
  MemcpyFn timed_cuda = cuda_memcpy;
  if (opt.batch) {
    g_batch_copies = opt.batch_copies;
    g_batch_reverse = opt.batch_reverse;
    CMT_CHECK_CUDA(cudaStreamCreateWithFlags(&g_batch_stream, cudaStreamNonBlocking));
    cmt_memcpy = &batch_copy;
    timed_cuda = [](void* d, const void* s, size_t n, cudaMemcpyKind k) {
      int was = g_forward_this_thread(1);
      cudaError_t e = batch_copy(d, s, n, k);
      g_forward_this_thread(was);
      return e;
    };
  }

  cudaDeviceProp prop{};
  CMT_CHECK_CUDA(cudaGetDeviceProperties(&prop, opt.device));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const std::string cpu = read_first("/proc/cpuinfo", "model name");
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::printf("cmt-bench-copy  %s  GPU %d: %s  CPU: %s (%ld cores)  driver %d\n", date, opt.device,
              prop.name, cpu.c_str(), cores, driver);
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

  const size_t max_bytes = *std::max_element(opt.sizes.begin(), opt.sizes.end());
  // The user's pageable buffers, touched once so page faults stay out of the figures (the
  // fresh-memory case is its own benchmark).
  auto* pageable = static_cast<unsigned char*>(std::malloc(max_bytes));
  auto* pageable_out = static_cast<unsigned char*>(std::malloc(max_bytes));
  unsigned char* pinned = nullptr;
  unsigned char* check = nullptr;
  void* dev = nullptr;
  if (!pageable || !pageable_out) usage("out of host memory");
  CMT_CHECK_CUDA(cudaMallocHost(&pinned, max_bytes));
  CMT_CHECK_CUDA(cudaMallocHost(&check, max_bytes));
  CMT_CHECK_CUDA(cudaMalloc(&dev, max_bytes));
  for (size_t i = 0; i < max_bytes; ++i) pageable[i] = static_cast<unsigned char>(i * 131 + 7);
  std::memcpy(pinned, pageable, max_bytes);
  std::memset(pageable_out, 0, max_bytes);

  // The "mmap" case's file: written once, so it sits in the page cache.
  std::string file_path;
  int file_fd = -1;
  if (std::find(opt.cases.begin(), opt.cases.end(), "mmap") != opt.cases.end()) {
    file_path = opt.file_dir + "/cmt-bench-copy-" + std::to_string(getpid()) + ".bin";
    file_fd = open(file_path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (file_fd < 0 || write(file_fd, pageable, max_bytes) != static_cast<ssize_t>(max_bytes))
      usage(("cannot write " + file_path + " for the mmap case (see --file-dir)").c_str());
    unlink(file_path.c_str());  // gone when the process ends; the descriptor keeps it
  }

  struct Row {
    std::string kind;
    size_t bytes;
    const char* dir;
    Sample s[3];
  };
  std::vector<Row> rows;
  long wrong = 0;
  for (const std::string& kind : opt.cases) {
    for (size_t bytes : opt.sizes) {
      for (int d = 0; d < 2; ++d) {
        const bool h2d = d == 0;
        if ((kind == "fresh" && h2d) || (kind == "mmap" && !h2d)) continue;
        Row row{kind, bytes, h2d ? "h2d" : "d2h", {}};
        for (int rep = -1; rep < opt.reps; ++rep) {  // rep -1 warms up
          for (int k = 0; k < 3; ++k) {
            const int mode = (k + rep + 3) % 3;  // rotate which mode goes first
            unsigned char* hostbuf = mode == 2 ? pinned : (h2d ? pageable : pageable_out);
            MemcpyFn fn = mode == 1 ? cmt_memcpy : timed_cuda;
            void* mapped = nullptr;  // this round's fresh mapping, if any (counted in the time)
            if (!h2d) {
              CMT_CHECK_CUDA(
                  cuda_memcpy(dev, pinned, bytes, cudaMemcpyHostToDevice));  // known contents
              CMT_CHECK_CUDA(cudaDeviceSynchronize());
              if (mode != 2) std::memset(hostbuf, 0, bytes);  // (its pages stay mapped)
            } else {
              CMT_CHECK_CUDA(cudaMemset(dev, 0, bytes));
              CMT_CHECK_CUDA(cudaDeviceSynchronize());
            }
            // A program that computes between its copies: CUDA's path and cmt's threads both
            // start cold (cmt's threads sleep after spin_us).
            if (opt.gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(opt.gap_us));
            auto t0 = std::chrono::steady_clock::now();
            if (mode != 2 && kind == "fresh") {
              mapped =
                  mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
              if (mapped == MAP_FAILED) usage("out of memory for a fresh buffer");
              hostbuf = static_cast<unsigned char*>(mapped);
            } else if (mode != 2 && kind == "mmap") {
              mapped = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, file_fd, 0);
              if (mapped == MAP_FAILED) usage("cannot map the file");
              hostbuf = static_cast<unsigned char*>(mapped);
            }
            if (h2d)
              CMT_CHECK_CUDA(fn(dev, hostbuf, bytes, cudaMemcpyHostToDevice));
            else
              CMT_CHECK_CUDA(fn(hostbuf, dev, bytes, cudaMemcpyDeviceToHost));
            CMT_CHECK_CUDA(cudaDeviceSynchronize());
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (rep >= 0) row.s[mode].gbps.push_back(bytes / s / 1e9);
            // Every copy's bytes are checked.
            if (h2d) {
              CMT_CHECK_CUDA(cuda_memcpy(check, dev, bytes, cudaMemcpyDeviceToHost));
              if (std::memcmp(check, pageable, bytes) != 0) ++wrong;
            } else if (std::memcmp(hostbuf, pinned, bytes) != 0) {
              ++wrong;
            }
            if (mapped) munmap(mapped, bytes);
          }
        }
        rows.push_back(row);
        const Row& r = rows.back();
        std::printf(
            "%5s %10zu %s  default %6.2f [%6.2f-%6.2f]  cmt %6.2f [%6.2f-%6.2f]  pinned %6.2f "
            "[%6.2f-%6.2f] GB/s  cmt/default %5.2fx  cmt/pinned %4.2f\n",
            r.kind.c_str(), bytes, r.dir, r.s[0].median(), r.s[0].lo(), r.s[0].hi(),
            r.s[1].median(), r.s[1].lo(), r.s[1].hi(), r.s[2].median(), r.s[2].lo(), r.s[2].hi(),
            r.s[1].median() / r.s[0].median(), r.s[1].median() / r.s[2].median());
        std::fflush(stdout);
      }
    }
  }
  if (file_fd >= 0) close(file_fd);
  if (wrong) std::printf("WRONG BYTES in %ld copies\n", wrong);

  if (!opt.json.empty()) {
    std::FILE* f = std::fopen(opt.json.c_str(), "w");
    if (!f) usage(("cannot write " + opt.json).c_str());
    std::string cmdline;
    for (int i = 0; i < argc; ++i) cmdline += std::string(i ? " " : "") + argv[i];
    // The machine's fingerprint and the configuration libcmt.so runs with here (the same loader).
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
                 date, json_escape(cmdline).c_str(), json_escape(host).c_str(),
                 json_escape(cpu).c_str(), cores, json_escape(prop.name).c_str(), prop.pciDomainID,
                 prop.pciBusID, prop.pciDeviceID, driver, opt.batch ? "batch" : "memcpy",
                 opt.batch ? opt.batch_copies : 0, opt.batch_reverse ? "reverse" : "forward",
                 opt.reps, opt.gap_us, wrong);
    bool first = true;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "CMT_", 4) == 0 && std::strncmp(*e, "CMT_BENCH", 9) != 0) {
        std::string kv = *e;
        auto eq = kv.find('=');
        std::fprintf(f, "%s\"%s\": \"%s\"", first ? "" : ", ",
                     json_escape(kv.substr(0, eq)).c_str(), json_escape(kv.substr(eq + 1)).c_str());
        first = false;
      }
    std::fprintf(f, "},\n  \"results\": [\n");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(f, "    {\"case\": \"%s\", \"bytes\": %zu, \"direction\": \"%s\"",
                   r.kind.c_str(), r.bytes, r.dir);
      for (int m = 0; m < 3; ++m) {
        std::fprintf(f, ", \"%s\": {\"median_gbps\": %.3f, \"min_gbps\": %.3f, \"max_gbps\": %.3f}",
                     kModes[m], r.s[m].median(), r.s[m].lo(), r.s[m].hi());
      }
      std::fprintf(f, ", \"cmt_over_default\": %.3f, \"cmt_over_pinned\": %.3f}%s\n",
                   r.s[1].median() / r.s[0].median(), r.s[1].median() / r.s[2].median(),
                   i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
  }
  if (!opt.csv.empty()) {
    std::FILE* f = std::fopen(opt.csv.c_str(), "w");
    if (!f) usage(("cannot write " + opt.csv).c_str());
    std::fprintf(f, "case,bytes,direction");
    for (const char* m : kModes)
      std::fprintf(f, ",%s_median_gbps,%s_min_gbps,%s_max_gbps", m, m, m);
    std::fprintf(f, ",cmt_over_default,cmt_over_pinned\n");
    for (const Row& r : rows) {
      std::fprintf(f, "%s,%zu,%s", r.kind.c_str(), r.bytes, r.dir);
      for (int m = 0; m < 3; ++m)
        std::fprintf(f, ",%.3f,%.3f,%.3f", r.s[m].median(), r.s[m].lo(), r.s[m].hi());
      std::fprintf(f, ",%.3f,%.3f\n", r.s[1].median() / r.s[0].median(),
                   r.s[1].median() / r.s[2].median());
    }
    std::fclose(f);
  }
  if (!opt.plot.empty()) {
    // bench/plot.py draws the SVG from the JSON (beside this program's source tree, or installed
    // with it); no plotting library needed.
    if (opt.json.empty()) usage("--plot needs --json (the plot is drawn from it)");
    std::string dir = self_dir();
    std::string script;
    for (const char* rel : {"/../bench/plot.py", "/../../share/cmt/plot.py"})
      if (access((dir + rel).c_str(), R_OK) == 0) script = dir + rel;
    if (script.empty()) usage("bench/plot.py not found for --plot");
    std::string cmd = "python3 '" + script + "' '" + opt.json + "' '" + opt.plot + "'";
    if (std::system(cmd.c_str()) != 0) usage(("drawing the plot failed: " + cmd).c_str());
    std::printf("plot: %s\n", opt.plot.c_str());
  }
  if (wrong) return 1;
  return 0;
}
