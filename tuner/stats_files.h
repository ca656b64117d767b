// The statistics of a process tree, read back and summed. Each process under cmt writes its own
// file at exit when CMT_STATS holds `%p` (its pid goes there), so a command that starts several
// programs (a shell script, a launcher, a data loader's workers) is counted whole: `cmt tune`
// watches a command's copies this way and `cmt run -v` ends with the tree's totals.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cmt {

// What the files of a tree add up to (libcmt.so's CMT_STATS JSON, interposer/stats.h).
struct StatsSum {
  int processes = 0;
  struct Direction {
    std::uint64_t calls = 0, bytes = 0;
    double seconds = 0;
    // The taken copies by size: the histogram bucket's low end -> {calls, bytes}.
    std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> sizes;
  } h2d, d2h;
  std::uint64_t host_calls = 0, host_bytes = 0, fill_calls = 0, fill_bytes = 0, host_faults = 0;
  // cmt's copy threads: their CPU time and the bytes cmt took (copy_threads in the files).
  double copy_threads_cpu_s = 0;
  std::uint64_t copy_threads_bytes = 0;
};

// The files a CMT_STATS value with `%p` names (each process's), or the one file it names.
std::vector<std::string> stats_files(const std::string& pattern);

// Adds one process's file to `sum`; false, with `*error` naming the file and what is wrong, if it
// cannot be read or is not cmt's.
bool add_stats_file(const std::string& path, StatsSum* sum, std::string* error);

// One line: the processes that used CUDA, copies taken each way (count, GiB, GB/s over each copy's own time), the
// host leg's copies and fills, and the CPU time cmt's copy threads used, per GB taken.
std::string describe_sum(const StatsSum& sum);

}  // namespace cmt
