// Whether this processor runs AVX2, asked of the processor itself (CPUID, and XGETBV for whether
// the kernel saves the wider registers). Not __builtin_cpu_supports: that links libgcc's CPU model
// in, whose constructor asks every CPUID leaf in every process that loads cmt's libraries, and in
// a virtual machine each CPUID is a trip to the hypervisor (bench/lab/NOTES.md 42). Three
// instructions here, asked only where the answer is needed.
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace cmt {

inline bool cpu_runs_avx2() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  if (!osxsave || !avx) return false;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 6) != 6) return false;  // the kernel saves XMM and YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return b & (1u << 5);
#else
  return false;
#endif
}

}  // namespace cmt
