// cmt-lab-weight-set (lab): offloaded inference's copies without torch (NOTES.md 53, 54). A set
// of host buffers with the sizes of a 1.1B Llama's weights (2.2 GB: per layer q 8, k 1, v 1, o 8
// MiB, three 22 MiB MLP weights and two 4 KiB norms, 22 layers, then two 125 MiB embeddings), each
// copied to the GPU in turn, cudaMemcpyAsync + cudaStreamSynchronize as torch's .to() makes it,
// pass after pass. Session 22's offload run had every weight hot yet the pass 31 ms slower than
// with pinned weights; the single-buffer lab (cmt-lab-registered) shows registered memory at
// pinned speed. This asks whether a whole set copied in turn is another matter. Modes, one pass
// each in turn, so drift hits all alike:
//   pinned      each buffer cudaMallocHost'd
//   registered  each posix_memalign'd (4 KiB pages) and registered by the program
//   huge        each 2 MiB-aligned, madvise(MADV_HUGEPAGE) before first touch, then registered:
//               whether the pages' size matters (transparent huge pages permitting)
//   pageable    each malloc'd: CUDA's staging, or cmt's hot path under `cmt run` with
//               CMT_REGISTER=hot (after its first passes registered them)
// Prints per mode the median pass (ms), its spread, GB/s, CPU seconds a pass (the process's, and
// of it cmt's copy threads', "cmt-copy") and the ratio to pinned; every buffer's bytes checked
// once per mode at the end.
//
// usage: cmt-lab-weight-set [--passes 8] [--modes pinned,registered,huge,pageable] [--layers 22]
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fstream>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "cuda_check.h"

namespace {

constexpr std::size_t kMiB = 1u << 20;

std::vector<std::size_t> llama_sizes(int layers) {
  std::vector<std::size_t> sizes;
  for (int l = 0; l < layers; ++l)
    for (std::size_t s : {8 * kMiB, kMiB, kMiB, 8 * kMiB, 22 * kMiB, 22 * kMiB, 22 * kMiB,
                          std::size_t{4096}, std::size_t{4096}})
      sizes.push_back(s);
  sizes.push_back(125 * kMiB);  // the embedding, the final norm and the output head
  sizes.push_back(4096);
  sizes.push_back(125 * kMiB);
  return sizes;
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// CPU seconds used so far by this process's threads named `name` (/proc/self/task/*/stat).
double threads_cpu_seconds(const char* name) {
  double ticks = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/stat");
      std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const std::size_t open = stat.find('('), close = stat.rfind(')');
      if (open == std::string::npos || close == std::string::npos ||
          stat.compare(open + 1, close - open - 1, name) != 0)
        continue;
      // After ")": stat(5)'s fields from the 3rd (state); utime and stime are the 14th and 15th.
      unsigned long long utime = 0, stime = 0;
      if (std::sscanf(stat.c_str() + close + 2,
                      "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                      &stime) == 2)
        ticks += static_cast<double>(utime + stime);
    }
    closedir(dir);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

char* allocate(const std::string& mode, std::size_t bytes) {
  void* p = nullptr;
  if (mode == "pinned") {
    CMT_CHECK_CUDA(cudaMallocHost(&p, bytes));
  } else if (mode == "registered" || mode == "huge") {
    const std::size_t align = mode == "huge" ? 2 * kMiB : 4096;
    const std::size_t rounded = (bytes + align - 1) / align * align;
    if (posix_memalign(&p, align, rounded) != 0) p = nullptr;
    if (p && mode == "huge") madvise(p, rounded, MADV_HUGEPAGE);  // a hint: may be refused
    if (p) std::memset(p, 1, rounded);
    if (p) CMT_CHECK_CU(cuMemHostRegister(p, rounded, CU_MEMHOSTREGISTER_PORTABLE));
  } else {
    p = std::malloc(bytes);
    if (p) std::memset(p, 1, bytes);
  }
  if (!p) {
    std::fprintf(stderr, "cmt-lab-weight-set: out of memory (%s)\n", mode.c_str());
    std::exit(1);
  }
  return static_cast<char*>(p);
}

struct Result {
  std::vector<double> pass_s, cpu_s, copy_threads_s;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Every buffer to the GPU and back, its bytes compared.
bool check(const std::vector<char*>& set, const std::vector<std::size_t>& sizes, char* device,
           char* back, cudaStream_t stream) {
  for (std::size_t i = 0; i < set.size(); ++i) {
    for (std::size_t k = 0; k < sizes[i]; k += 4093) set[i][k] = static_cast<char>(i + k);
    CMT_CHECK_CUDA(cudaMemcpyAsync(device, set[i], sizes[i], cudaMemcpyHostToDevice, stream));
    CMT_CHECK_CUDA(cudaStreamSynchronize(stream));
    CMT_CHECK_CUDA(cudaMemcpy(back, device, sizes[i], cudaMemcpyDeviceToHost));
    if (std::memcmp(back, set[i], sizes[i]) != 0) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int passes = 8, layers = 22;
  std::string mode_list = "pinned,registered,huge,pageable";
  CLI::App app{"cmt-lab-weight-set: a 1.1B Llama's weights copied to the GPU in turn, pass after "
               "pass, from pinned, registered and pageable memory"};
  app.add_option("--passes", passes, "Timed passes of each mode")->check(CLI::PositiveNumber);
  app.add_option("--layers", layers, "Transformer layers in the set")->check(CLI::PositiveNumber);
  app.add_option("--modes", mode_list, "Comma-separated: pinned, registered, huge, pageable");
  CLI11_PARSE(app, argc, argv);
  std::vector<std::string> modes;
  for (std::size_t at = 0; at <= mode_list.size();) {
    std::size_t end = mode_list.find(',', at);
    if (end == std::string::npos) end = mode_list.size();
    modes.push_back(mode_list.substr(at, end - at));
    at = end + 1;
  }
  for (const std::string& m : modes)
    if (m != "pinned" && m != "registered" && m != "huge" && m != "pageable") {
      std::fprintf(stderr, "cmt-lab-weight-set: --modes: unknown mode '%s' (pinned, registered, "
                   "huge, pageable)\n", m.c_str());
      return 2;
    }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "cmt-lab-weight-set: no CUDA GPU found\n");
    return 1;
  }
  CMT_CHECK_CUDA(cudaSetDevice(0));
  cudaStream_t stream;
  CMT_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::vector<std::size_t> sizes = llama_sizes(layers);
  std::size_t total = 0, largest = 0;
  for (std::size_t s : sizes) total += s, largest = std::max(largest, s);
  // Each weight has its own place on the GPU, as offloading's execution device holds them.
  char* device = nullptr;
  CMT_CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&device), total));
  std::vector<std::vector<char*>> sets(modes.size());
  for (std::size_t m = 0; m < modes.size(); ++m)
    for (std::size_t s : sizes) sets[m].push_back(allocate(modes[m], s));
  std::vector<Result> results(modes.size());
  constexpr int kWarm = 3;  // under cmt hot, the second pass registers; the third is hot
  for (int pass = 0; pass < passes + kWarm; ++pass)
    for (std::size_t k = 0; k < modes.size(); ++k) {
      const std::size_t m = (k + pass) % modes.size();
      const double threads0 = threads_cpu_seconds("cmt-copy");
      const double c0 = cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      std::size_t offset = 0;
      for (std::size_t i = 0; i < sizes.size(); offset += sizes[i], ++i) {
        CMT_CHECK_CUDA(cudaMemcpyAsync(device + offset, sets[m][i], sizes[i],
                                       cudaMemcpyHostToDevice, stream));
        CMT_CHECK_CUDA(cudaStreamSynchronize(stream));
      }
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (pass >= kWarm) {
        results[m].pass_s.push_back(t);
        results[m].cpu_s.push_back(cpu_seconds() - c0);
        results[m].copy_threads_s.push_back(threads_cpu_seconds("cmt-copy") - threads0);
      }
    }
  char* back = nullptr;
  CMT_CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&back), largest));
  std::printf("%zu buffers, %.2f GB a pass, %d passes a mode after %d warm\n", sizes.size(),
              static_cast<double>(total) / 1e9, passes, kWarm);
  std::printf("%-11s %9s %17s %7s %9s %10s %8s %s\n", "mode", "pass ms", "[min-max]", "GB/s",
              "CPU s", "cmt-copy s", "/pinned", "bytes");
  double pinned_ms = 0;
  for (std::size_t m = 0; m < modes.size(); ++m)
    if (modes[m] == "pinned") pinned_ms = median(results[m].pass_s) * 1e3;
  bool ok = true;
  for (std::size_t m = 0; m < modes.size(); ++m) {
    const Result& r = results[m];
    const double ms = median(r.pass_s) * 1e3;
    const bool good = check(sets[m], sizes, device, back, stream);
    ok = ok && good;
    std::printf("%-11s %9.1f [%6.1f-%6.1f] %7.1f %9.3f %10.3f %8s %s\n", modes[m].c_str(), ms,
                *std::min_element(r.pass_s.begin(), r.pass_s.end()) * 1e3,
                *std::max_element(r.pass_s.begin(), r.pass_s.end()) * 1e3,
                static_cast<double>(total) / (ms * 1e6), median(r.cpu_s), median(r.copy_threads_s),
                pinned_ms > 0 ? std::to_string(pinned_ms / ms).substr(0, 4).c_str() : "-",
                good ? "ok" : "WRONG");
  }
  return ok ? 0 : 1;
}
