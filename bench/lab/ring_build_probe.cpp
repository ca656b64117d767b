// cmt-lab-ring-build (lab, GPU): what making a staging ring costs, part by part, and what the
// alternatives would (issue 32, lab/NOTES.md 86). A lane's first copy waits for its ring: on the
// H100 VM its first DMA came 12-17 ms (H2D ring, 12 x 2 MiB) and 25-36 ms (D2H, 12 x 4 MiB) after
// the engine had it, where the next copies' came 40-75 us after. For each size, methods taking
// turns, each on fresh memory, ms:
//   fault      mmap + memset (the ring's way of faulting its pages in on the chosen node)
//   populate   mmap + madvise(MADV_POPULATE_WRITE) (Linux 5.14: the same pages, no exception each)
//   register   cuMemHostRegister(PORTABLE) of the faulted memory (pinning it for the DMA engine)
//   1st write  a memset of the registered memory, as the copy threads' first staging writes it
//              (on the development VM a page populated but never written costs its first write
//              what the memset would have: NOTES 76)
//   huge       mmap 2 MiB aligned + madvise(MADV_HUGEPAGE) + memset: one fault per 2 MiB instead of
//              512 (THP is `madvise` on the GPU VMs: nothing is huge unless asked; a 4 KiB first
//              touch there costs about 2.5 us, NOTES 25, which is 15 ms for a 24 MiB ring)
//   huge+pop   the same aligned huge-page mapping faulted with MADV_POPULATE_WRITE instead of the
//              memset (the kernel zeroes each 2 MiB page; the memset then writes it a second time)
//   hostalloc  cuMemHostAlloc(PORTABLE): the driver's own pinned allocation, in one call
//   unregister cuMemHostUnregister + munmap, and cuMemFreeHost (what a ring's end costs)
// The process's first of each is printed apart: a lane is built once per process. Session 42's run
// (results/2026-12-06-h200-ring-huge-pages-s42.txt) had every method but huge+pop, added after it.
//
// usage: cmt-lab-ring-build [--sizes 24M,48M] [--reps 5]
#include <cuda.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench_cli.h"
#include "cuda_check.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Row {
  std::vector<double> fault, populate, huge, huge_populate, reg_faulted, reg_populated, reg_huge,
      write_faulted, write_populated, write_huge, hostalloc, write_hostalloc, unreg, free_host;
};

void* fresh_mapping(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("cmt-lab-ring-build: mmap");
    std::exit(1);
  }
  return p;
}

constexpr std::size_t kHuge = std::size_t{2} << 20;

// `bytes` at a 2 MiB boundary inside a larger mapping (the slack is left mapped: a lab program).
void* huge_mapping(std::size_t bytes) {
  const auto raw = reinterpret_cast<std::uintptr_t>(fresh_mapping(bytes + kHuge));
  void* p = reinterpret_cast<void*>((raw + kHuge - 1) / kHuge * kHuge);
  if (madvise(p, bytes, MADV_HUGEPAGE) != 0) std::perror("cmt-lab-ring-build: MADV_HUGEPAGE");
  return p;
}

// One round of every method at `bytes`, appended to `row`.
void one_round(std::size_t bytes, Row* row) {
  Clock::time_point t0 = Clock::now();
  void* a = fresh_mapping(bytes);
  std::memset(a, 0, bytes);
  row->fault.push_back(ms_since(t0));
  t0 = Clock::now();
  CMT_CHECK_CU(cuMemHostRegister(a, bytes, CU_MEMHOSTREGISTER_PORTABLE));
  row->reg_faulted.push_back(ms_since(t0));
  t0 = Clock::now();
  std::memset(a, 1, bytes);
  row->write_faulted.push_back(ms_since(t0));

  t0 = Clock::now();
  void* b = fresh_mapping(bytes);
  const bool populated = madvise(b, bytes, MADV_POPULATE_WRITE) == 0;
  if (!populated) std::memset(b, 0, bytes);  // an older kernel: faulted as the ring does
  row->populate.push_back(populated ? ms_since(t0) : -1);
  t0 = Clock::now();
  CMT_CHECK_CU(cuMemHostRegister(b, bytes, CU_MEMHOSTREGISTER_PORTABLE));
  row->reg_populated.push_back(ms_since(t0));
  t0 = Clock::now();
  std::memset(b, 1, bytes);
  row->write_populated.push_back(ms_since(t0));

  t0 = Clock::now();
  void* h = huge_mapping(bytes);
  std::memset(h, 0, bytes);
  row->huge.push_back(ms_since(t0));
  t0 = Clock::now();
  void* hp = huge_mapping(bytes);
  if (madvise(hp, bytes, MADV_POPULATE_WRITE) != 0) std::memset(hp, 0, bytes);
  row->huge_populate.push_back(ms_since(t0));
  t0 = Clock::now();
  CMT_CHECK_CU(cuMemHostRegister(h, bytes, CU_MEMHOSTREGISTER_PORTABLE));
  row->reg_huge.push_back(ms_since(t0));
  t0 = Clock::now();
  std::memset(h, 1, bytes);
  row->write_huge.push_back(ms_since(t0));

  t0 = Clock::now();
  void* c = nullptr;
  CMT_CHECK_CU(cuMemHostAlloc(&c, bytes, CU_MEMHOSTALLOC_PORTABLE));
  row->hostalloc.push_back(ms_since(t0));
  t0 = Clock::now();
  std::memset(c, 1, bytes);
  row->write_hostalloc.push_back(ms_since(t0));

  t0 = Clock::now();
  CMT_CHECK_CU(cuMemHostUnregister(a));
  munmap(a, bytes);
  row->unreg.push_back(ms_since(t0));
  CMT_CHECK_CU(cuMemHostUnregister(b));
  munmap(b, bytes);
  CMT_CHECK_CU(cuMemHostUnregister(h));
  munmap(h, bytes);
  munmap(hp, bytes);
  t0 = Clock::now();
  CMT_CHECK_CU(cuMemFreeHost(c));
  row->free_host.push_back(ms_since(t0));
}

void say(const char* name, const std::vector<double>& v) {
  std::vector<double> rest(v.begin() + 1, v.end());
  std::sort(rest.begin(), rest.end());
  std::printf("  %-22s first %7.2f  then median %7.2f (%.2f-%.2f)\n", name, v[0],
              rest.empty() ? v[0] : rest[rest.size() / 2], rest.empty() ? v[0] : rest.front(),
              rest.empty() ? v[0] : rest.back());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes = {std::size_t{24} << 20, std::size_t{48} << 20};
  int reps = 5;
  CLI::App app{"What making a staging ring costs, part by part", "cmt-lab-ring-build"};
  cmt::bench::add_sizes(app, "--sizes", &sizes, "Ring sizes");
  app.add_option("--reps", reps, "Rounds of each")->check(CLI::Range(1, 100));
  if (const int rc = cmt::bench::parse_command_line(app, argc, argv); rc >= 0) return rc;
  CMT_CHECK_CU(cuInit(0));
  CUdevice dev;
  CMT_CHECK_CU(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CMT_CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CMT_CHECK_CU(cuCtxSetCurrent(ctx));
  for (const std::size_t bytes : sizes) {
    Row row;
    for (int r = 0; r < reps; ++r) one_round(bytes, &row);
    std::printf("%zu MiB, %d rounds, ms (the process's first, then the median of the rest):\n",
                bytes >> 20, reps);
    say("mmap + memset", row.fault);
    say("mmap + POPULATE_WRITE", row.populate);
    say("mmap huge + memset", row.huge);
    say("mmap huge + POPULATE", row.huge_populate);
    say("register (memset)", row.reg_faulted);
    say("register (populated)", row.reg_populated);
    say("register (huge)", row.reg_huge);
    say("1st write (memset)", row.write_faulted);
    say("1st write (populated)", row.write_populated);
    say("1st write (huge)", row.write_huge);
    say("cuMemHostAlloc", row.hostalloc);
    say("1st write (hostalloc)", row.write_hostalloc);
    say("unregister + munmap", row.unreg);
    say("cuMemFreeHost", row.free_host);
  }
  return 0;
}
