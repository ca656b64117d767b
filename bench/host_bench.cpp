// cmt-bench-host: the host leg, timed. Two modes:
//
//   fill   A program that stages through its own pinned buffer, as safetensors and framework
//          loaders do: memmove a pageable array into a cudaHostAlloc buffer, then cudaMemcpy that
//          buffer to the GPU. Timed in one process (under libcmt.so) three ways, rounds
//          alternating:
//            default  the thread opted out (cmt_forward_this_thread): libc's memmove
//            cmt      the same memmove, taken by libcmt.so's host copier
//            dma      the cudaMemcpy alone, from the pinned buffer: the ceiling of the pair
//          The bytes on the GPU are checked against the source after every pair.
//   small  memcpy of SIZE bytes (64 by default) in a tight loop through the PLT: nanoseconds per
//          call. Run with and without libcmt.so preloaded (bench/host_leg.py alternates them).
//   fresh  A new buffer zero-filled and then the target of a device-to-host copy:
//          `std::vector<float>(n)` (a memset of a new mmap'd block), then cudaMemcpy into it. In
//          one process under libcmt.so, rounds alternating: default (the thread opted out: libc's
//          memset and CUDA's copy) and cmt (both through cmt); with two yardsticks, the machine's
//          fresh-page limit (a new mapping populated as fast as the host can, nothing written)
//          and the memset of a buffer already faulted in (no page faults). Bytes checked.
//
// usage: cmt-bench-host fill [--bytes N] [--reps N] [--json FILE]
//        cmt-bench-host small [--size N] [--calls N]
//        cmt-bench-host fresh [--bytes N] [--reps N] [--json FILE]
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/output_file.h"
#include "cuda_check.h"

namespace {

using Clock = std::chrono::steady_clock;
using ForwardFn = int (*)(int);

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "64M", "1G", "4096": a byte count with an optional K, M or G (powers of 1024).
std::size_t parse_bytes(const std::string& text) {
  char* end = nullptr;
  std::size_t n = std::strtoull(text.c_str(), &end, 10);
  if (end && *end) {
    const char unit = static_cast<char>(*end | 0x20);
    n <<= unit == 'k' ? 10 : unit == 'm' ? 20 : unit == 'g' ? 30 : 0;
  }
  return n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// (max - min) / median: how far the rounds spread.
double spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.back() - v.front()) / v[v.size() / 2];
}

// printf into a string, for the JSON files.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, again);
  va_end(again);
  return out;
}

// `text` as the file at `path` (common/output_file.h); false, said, if it cannot be written.
bool save_json(const std::string& path, const std::string& text) {
  std::string why;
  if (cmt::write_output_file(path, text, &why)) return true;
  std::fprintf(stderr, "cmt-bench-host: cannot write %s: %s\n", path.c_str(), why.c_str());
  return false;
}

int fill(std::size_t bytes, int reps, const std::string& json) {
  auto forward = reinterpret_cast<ForwardFn>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread"));
  if (!forward) {
    std::fprintf(stderr, "cmt-bench-host fill: run it under libcmt.so (cmt run -- ...)\n");
    return 2;
  }
  std::vector<unsigned char> src(bytes), back(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    src[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  void* pinned = nullptr;
  void* dev = nullptr;
  CMT_CHECK_CUDA(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault));
  CMT_CHECK_CUDA(cudaMalloc(&dev, bytes));
  std::memset(pinned, 0, bytes);
  std::vector<double> t_default, t_cmt, t_dma, m_default, m_cmt;
  long wrong = 0;
  auto pair = [&](bool cmt, std::vector<double>& total, std::vector<double>& move) {
    CMT_CHECK_CUDA(cudaMemset(dev, 0, bytes));
    CMT_CHECK_CUDA(cudaDeviceSynchronize());
    forward(cmt ? 0 : 1);
    auto t0 = Clock::now();
    std::memmove(pinned, src.data(), bytes);
    const double m = seconds_since(t0);
    CMT_CHECK_CUDA(cudaMemcpy(dev, pinned, bytes, cudaMemcpyHostToDevice));
    const double t = seconds_since(t0);
    forward(0);
    total.push_back(t);
    move.push_back(m);
    CMT_CHECK_CUDA(cudaMemcpy(back.data(), dev, bytes, cudaMemcpyDeviceToHost));
    if (std::memcmp(back.data(), src.data(), bytes) != 0) ++wrong;
  };
  for (int r = 0; r < reps + 1; ++r) {  // the first round warms up and is dropped
    std::vector<double> d, c, dm, cm, x;
    pair(r % 2 == 0, r % 2 == 0 ? c : d, r % 2 == 0 ? cm : dm);
    pair(r % 2 != 0, r % 2 == 0 ? d : c, r % 2 == 0 ? dm : cm);
    auto t0 = Clock::now();
    CMT_CHECK_CUDA(cudaMemcpy(dev, pinned, bytes, cudaMemcpyHostToDevice));
    x.push_back(seconds_since(t0));
    if (r == 0) continue;
    t_default.push_back(d[0]);
    t_cmt.push_back(c[0]);
    m_default.push_back(dm[0]);
    m_cmt.push_back(cm[0]);
    t_dma.push_back(x[0]);
  }
  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf(
      "memmove %zu MiB into a cudaHostAlloc buffer, then cudaMemcpy to the GPU (%d rounds, "
      "medians):\n",
      bytes >> 20, reps);
  std::printf("  default  pair %.1f GB/s  (memmove %.1f GB/s)\n", gb / median(t_default),
              gb / median(m_default));
  std::printf("  cmt      pair %.1f GB/s  (memmove %.1f GB/s)\n", gb / median(t_cmt),
              gb / median(m_cmt));
  std::printf("  dma      alone %.1f GB/s (the pair's ceiling)\n", gb / median(t_dma));
  std::printf("  cmt/default %.2fx, cmt/dma %.2f; wrong %ld\n", median(t_default) / median(t_cmt),
              median(t_dma) / median(t_cmt), wrong);
  if (!json.empty() &&
      !save_json(
          json,
          format("{\"bytes\": %zu, \"rounds\": %d, \"default_pair_gbps\": %.2f, "
                 "\"cmt_pair_gbps\": %.2f, \"dma_gbps\": %.2f, \"default_memmove_gbps\": %.2f, "
                 "\"cmt_memmove_gbps\": %.2f, \"ratio\": %.3f, \"spread_default\": %.3f, "
                 "\"spread_cmt\": %.3f, \"wrong\": %ld}\n",
                 bytes, reps, gb / median(t_default), gb / median(t_cmt), gb / median(t_dma),
                 gb / median(m_default), gb / median(m_cmt), median(t_default) / median(t_cmt),
                 spread(t_default), spread(t_cmt), wrong)))
    return 1;
  CMT_CHECK_CUDA(cudaFreeHost(pinned));
  CMT_CHECK_CUDA(cudaFree(dev));
  return wrong == 0 ? 0 : 1;
}

// A new mapping of `bytes` made resident as fast as this host can: the 2 MiB blocks populated
// (MADV_POPULATE_WRITE) by `threads` threads at once, huge pages asked for first if `huge`,
// nothing written after. Seconds. The fastest over thread counts is the fresh-page limit.
double populate_limit(std::size_t bytes, unsigned threads, bool huge) {
  constexpr std::size_t kBlock = 2u << 20;
  const std::size_t blocks = bytes / kBlock;
  void* p =
      mmap(nullptr, bytes + kBlock, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::exit(1);
  auto* first =
      reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(p) + kBlock - 1) & ~(kBlock - 1));
  auto t0 = Clock::now();
  if (huge) (void)madvise(first, blocks * kBlock, MADV_HUGEPAGE);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < blocks;)
        if (madvise(first + i * kBlock, kBlock, 23 /* MADV_POPULATE_WRITE */) != 0)
          std::memset(first + i * kBlock, 0, kBlock);
    });
  for (auto& t : pool) t.join();
  const double s = seconds_since(t0);
  munmap(p, bytes + kBlock);
  return s;
}

int fresh(std::size_t bytes, int reps, const std::string& json) {
  auto forward = reinterpret_cast<ForwardFn>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread"));
  if (!forward) {
    std::fprintf(stderr, "cmt-bench-host fresh: run it under libcmt.so (cmt run -- ...)\n");
    return 2;
  }
  const std::size_t n = bytes / sizeof(float);
  bytes = n * sizeof(float);
  void* dev = nullptr;
  CMT_CHECK_CUDA(cudaMalloc(&dev, bytes));
  CMT_CHECK_CUDA(cudaMemset(dev, 0x5A, bytes));
  CMT_CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<double> fill_d, fill_c, pair_d, pair_c, fill_resident;
  // The fresh-page limit's candidates: thread counts, with and without huge pages.
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned> counts;
  for (unsigned t = 1; t < cpus; t *= 2) counts.push_back(t);
  counts.push_back(cpus);
  std::vector<std::vector<double>> limit_huge(counts.size()), limit_small(counts.size());
  long wrong = 0;
  auto one = [&](bool cmt) {
    forward(cmt ? 0 : 1);
    auto t0 = Clock::now();
    // The program the issue names: value-initialisation, which GCC compiles to a memset call
    // over a new malloc'd (so mmap'd, never written) block.
    auto* v = new std::vector<float>(n);
    const double f = seconds_since(t0);
    CMT_CHECK_CUDA(cudaMemcpy(v->data(), dev, bytes, cudaMemcpyDeviceToHost));
    const double t = seconds_since(t0);
    forward(0);
    const auto* b = reinterpret_cast<const unsigned char*>(v->data());
    for (std::size_t i = 0; i < bytes; i += 4093)
      if (b[i] != 0x5A) {
        ++wrong;
        break;
      }
    if (b[bytes - 1] != 0x5A) ++wrong;
    delete v;
    (cmt ? fill_c : fill_d).push_back(f);
    (cmt ? pair_c : pair_d).push_back(t);
  };
  std::vector<unsigned char> resident(bytes, 1);
  for (int r = 0; r < reps + 1; ++r) {  // the first round warms up and is dropped
    const std::size_t before = fill_d.size();
    one(r % 2 == 0);
    one(r % 2 != 0);
    forward(1);
    auto t0 = Clock::now();
    std::memset(resident.data(), r, bytes);
    const double x = seconds_since(t0);
    forward(0);
    if (r > 0)
      for (std::size_t i = 0; i < counts.size(); ++i) {
        limit_huge[i].push_back(populate_limit(bytes, counts[i], true));
        limit_small[i].push_back(populate_limit(bytes, counts[i], false));
      }
    if (r == 0) {
      fill_d.resize(before);
      fill_c.resize(before);
      pair_d.resize(before);
      pair_c.resize(before);
      continue;
    }
    fill_resident.push_back(x);
  }
  const double gb = static_cast<double>(bytes) / 1e9;
  double limit = 1e30;
  unsigned limit_threads = 0;
  bool limit_huge_pages = false;
  std::string limits_json;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double h = median(limit_huge[i]), p = median(limit_small[i]);
    if (h < limit) limit = h, limit_threads = counts[i], limit_huge_pages = true;
    if (p < limit) limit = p, limit_threads = counts[i], limit_huge_pages = false;
    limits_json += (i ? ", " : "") + std::string("{\"threads\": ") + std::to_string(counts[i]) +
                   ", \"huge_gbps\": " + std::to_string(gb / h) +
                   ", \"small_gbps\": " + std::to_string(gb / p) + "}";
  }
  std::printf(
      "std::vector<float>(%zu) (%zu MiB, a memset of new memory), then cudaMemcpy D2H into "
      "it (%d rounds, medians):\n",
      n, bytes >> 20, reps);
  std::printf("  default  memset %.1f GB/s, pair %.1f GB/s\n", gb / median(fill_d),
              gb / median(pair_d));
  std::printf("  cmt      memset %.1f GB/s, pair %.1f GB/s\n", gb / median(fill_c),
              gb / median(pair_c));
  std::printf(
      "  fresh-page limit (the fastest population of a new mapping, nothing written): "
      "%.1f GB/s, %u threads, %s pages\n",
      gb / limit, limit_threads, limit_huge_pages ? "huge" : "4 KiB");
  std::printf("    populate GB/s by threads (huge / 4 KiB pages):");
  for (std::size_t i = 0; i < counts.size(); ++i)
    std::printf(" %u: %.1f / %.1f;", counts[i], gb / median(limit_huge[i]),
                gb / median(limit_small[i]));
  std::printf("\n");
  std::printf("  memset of memory already faulted in (one thread): %.1f GB/s\n",
              gb / median(fill_resident));
  std::printf(
      "  pair cmt/default %.2fx, memset cmt/default %.2fx, cmt memset/limit %.2f; wrong %ld\n",
      median(pair_d) / median(pair_c), median(fill_d) / median(fill_c), limit / median(fill_c),
      wrong);
  if (!json.empty() &&
      !save_json(
          json,
          format(
              "{\"bytes\": %zu, \"rounds\": %d, \"default_memset_gbps\": %.2f, "
              "\"cmt_memset_gbps\": %.2f, \"resident_memset_gbps\": %.2f, "
              "\"fresh_page_limit_gbps\": %.2f, \"limit_threads\": %u, \"limit_huge\": %s, "
              "\"populate\": [%s], "
              "\"default_pair_gbps\": %.2f, \"cmt_pair_gbps\": %.2f, \"pair_ratio\": %.3f, "
              "\"memset_ratio\": %.3f, \"spread_pair_default\": %.3f, \"spread_pair_cmt\": %.3f, "
              "\"wrong\": %ld}\n",
              bytes, reps, gb / median(fill_d), gb / median(fill_c), gb / median(fill_resident),
              gb / limit, limit_threads, limit_huge_pages ? "true" : "false", limits_json.c_str(),
              gb / median(pair_d), gb / median(pair_c), median(pair_d) / median(pair_c),
              median(fill_d) / median(fill_c), spread(pair_d), spread(pair_c), wrong)))
    return 1;
  CMT_CHECK_CUDA(cudaFree(dev));
  return wrong == 0 ? 0 : 1;
}

// The size comes from a volatile, so the compiler cannot inline the copy: every call goes
// through the PLT to whichever memcpy the process bound (libc's, or libcmt.so's hook).
volatile std::size_t g_size = 64;

int small(std::size_t size, long calls) {
  g_size = size;
  // Source and destination in one page-aligned block, 2 KiB apart modulo 4 KiB whatever the
  // process's layout: where the heap happens to put two buffers otherwise decides whether loads
  // and stores alias modulo 4 KiB, which moved this loop by 30% between runs of the same code.
  const std::size_t span = size + 128;
  auto* block = static_cast<unsigned char*>(std::aligned_alloc(4096, 4 * 4096 + 2 * span));
  if (!block) return 1;
  unsigned char* a = block;
  unsigned char* b = block + ((span + 4095) / 4096 + 1) * 4096 + 2048;
  std::memset(block, 1, 4 * 4096 + 2 * span);
  for (long i = 0; i < calls / 10; ++i) std::memcpy(b, a, g_size);  // warm
  auto t0 = Clock::now();
  for (long i = 0; i < calls; ++i) {
    std::memcpy(b + (i & 63), a + (i & 127), g_size);
  }
  const double s = seconds_since(t0);
  std::printf("{\"size\": %zu, \"calls\": %ld, \"ns_per_call\": %.3f, \"check\": %d}\n", size,
              calls, s * 1e9 / static_cast<double>(calls), b[size / 2]);
  std::free(block);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cmt-bench-host fill|small|fresh [options]\n");
    return 2;
  }
  std::string mode = argv[1], json;
  std::size_t bytes = 1u << 30, size = 64;
  int reps = 5;
  long calls = 200000000;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--bytes")
      bytes = parse_bytes(v);
    else if (k == "--reps")
      reps = std::atoi(v.c_str());
    else if (k == "--json")
      json = v;
    else if (k == "--size")
      size = parse_bytes(v);
    else if (k == "--calls")
      calls = std::atol(v.c_str());
    else {
      std::fprintf(stderr, "cmt-bench-host: unknown option '%s'\n", k.c_str());
      return 2;
    }
  }
  if (mode == "fill") return fill(bytes, reps, json);
  if (mode == "small") return small(size, calls);
  if (mode == "fresh") return fresh(bytes, reps, json);
  std::fprintf(stderr, "cmt-bench-host: unknown mode '%s' (expected fill, small or fresh)\n",
               mode.c_str());
  return 2;
}
