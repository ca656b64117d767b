// Session 40, CPU only (development VM, AMD EPYC, 2 cores): what writing back (clwb) or evicting
// (clflushopt) a 2 MiB stretch costs right after pread'ing it from a page-cache file (lab/NOTES.md 84).
// Build: g++ -O2 -o read_flush_probe read_flush_probe.cpp; run: ./read_flush_probe FILE (>= 128 MiB,
// in the page cache).
// pread a 2 MiB stretch of a page-cache file into a buffer, then (optionally) clwb / clflushopt it.
#include <fcntl.h>
#include <immintrin.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
__attribute__((target("clwb"))) void wb(char* p, size_t n) { for (size_t i = 0; i < n; i += 64) _mm_clwb(p + i); _mm_sfence(); }
__attribute__((target("clflushopt"))) void ev(char* p, size_t n) { for (size_t i = 0; i < n; i += 64) _mm_clflushopt(p + i); _mm_sfence(); }
int main(int argc, char** argv) {
  int fd = open(argv[1], O_RDONLY);
  size_t n = 2u << 20; char* buf = (char*)aligned_alloc(4096, n);
  for (size_t i = 0; i < n; i += 4096) buf[i] = 1;
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<double> rd, fl;
    for (int r = 0; r < 200; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      if (pread(fd, buf, n, (off_t)(r % 64) * n) != (ssize_t)n) return 1;
      auto t1 = std::chrono::steady_clock::now();
      if (mode == 1) wb(buf, n); else if (mode == 2) ev(buf, n);
      auto t2 = std::chrono::steady_clock::now();
      rd.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      fl.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    std::sort(rd.begin(), rd.end()); std::sort(fl.begin(), fl.end());
    printf("%-10s pread 2 MiB median %.0f us, then flush median %.0f us\n", mode == 0 ? "plain" : mode == 1 ? "clwb" : "clflushopt", rd[100], fl[100]);
  }
}
