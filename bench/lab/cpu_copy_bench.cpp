// cmt-bench-cpu: the CPU's side of a staged copy alone, against thread count: user buffer -> a
// small staging ring (H2D), ring -> user buffer (D2H) with plain and streaming stores, and ring ->
// freshly mapped memory (D2H into a new tensor: as it faults, after MADV_HUGEPAGE, after
// MADV_POPULATE_WRITE). No GPU needed. Usage:
//   cmt-bench-cpu [--bytes 1G] [--ring 32M] [--threads 1,2,4,8] [--reps 3]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "config/options.h"
#include "memcpy_scaling.h"

int main(int argc, char** argv) {
  std::size_t bytes = 1u << 30, ring = 32u << 20;
  std::vector<unsigned> threads;
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "cmt-bench-cpu: %s needs a value\n", a.c_str());
      return 2;
    }
    std::string v = argv[++i];
    if ((a == "--bytes" && cmt::parse_byte_size(v, &bytes)) ||
        (a == "--ring" && cmt::parse_byte_size(v, &ring))) {
      continue;
    } else if (a == "--reps") {
      reps = std::atoi(v.c_str());
    } else if (a == "--threads") {
      for (std::size_t p = 0, q; p <= v.size(); p = q + 1) {
        q = v.find(',', p);
        if (q == std::string::npos) q = v.size();
        threads.push_back(static_cast<unsigned>(std::atoi(v.substr(p, q - p).c_str())));
      }
    } else {
      std::fprintf(stderr, "cmt-bench-cpu: bad argument %s %s\n", a.c_str(), v.c_str());
      return 2;
    }
  }
  if (threads.empty()) {
    unsigned n = std::thread::hardware_concurrency();
    for (unsigned t = 1; t <= n; t = t < 4 ? t + 1 : t + 2) threads.push_back(t);
  }
  struct Case {
    const char* name;
    cmt::ScalingCase which;
    cmt::CopyMethod method;
  } cases[] = {
      {"stage_in_memcpy", cmt::ScalingCase::StageIn, cmt::CopyMethod::Memcpy},
      {"drain_out_memcpy", cmt::ScalingCase::DrainOut, cmt::CopyMethod::Memcpy},
      {"drain_out_streaming", cmt::ScalingCase::DrainOut, cmt::CopyMethod::Streaming},
      {"drain_fresh_streaming", cmt::ScalingCase::DrainOutFresh, cmt::CopyMethod::Streaming},
      {"drain_fresh_huge", cmt::ScalingCase::DrainOutFreshHuge, cmt::CopyMethod::Streaming},
      {"drain_fresh_populate", cmt::ScalingCase::DrainOutFreshPopulate,
       cmt::CopyMethod::Streaming}};
  std::printf("%-24s", "threads");
  for (unsigned t : threads) std::printf("%7u", t);
  std::printf("   (GB/s, %zu MiB through a %zu MiB ring, median of %d)\n", bytes >> 20, ring >> 20,
              reps);
  for (const Case& c : cases) {
    auto points = cmt::measure_memcpy_scaling(c.which, threads, {}, bytes, ring, c.method, reps);
    std::printf("%-24s", c.name);
    for (const auto& p : points) std::printf("%7.1f", p.gbps);
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
