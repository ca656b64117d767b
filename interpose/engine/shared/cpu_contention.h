// Whether every CPU of the machine is taken: more threads runnable now, of every process, than
// the machine has CPUs online. cmt's idle copy threads spin between jobs only while it says no,
// so that their spin never holds a core that a thread of this program or of another wants.
//
// Why: each process under cmt has copy threads of its own, and none knows of the others'. Eight
// processes copying to one GPU on the 16-core H100 machine (cmt bench copy --processes, session
// 52) ran 64 copy threads that spun up to 1 ms after every unit, and together moved 34.3 GB/s
// host to device, where CUDA's own path in the same eight processes moved 36.0; with the spin off
// they moved 40.1, and four processes both ways 73.7 GB/s against 48.9 (lab/NOTES.md 99).
//
// Read from /proc/loadavg, whose fourth field counts the runnable threads (the reader among them)
// over all threads, at most once every kRefreshNs per instance: whichever spinning thread finds
// the answer stale reads it again, the others take the one held. Where the file cannot be read
// the answer is always no, and the threads spin as they always did.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/kept_file.h"

namespace cmt {

class CpuContention {
 public:
  static constexpr std::int64_t kRefreshNs = 500'000;

  // `path`: the loadavg file; `cpus`: the CPUs the runnable threads share (0: those online).
  explicit CpuContention(const std::string& path = "/proc/loadavg", unsigned cpus = 0);
  ~CpuContention();
  CpuContention(const CpuContention&) = delete;
  CpuContention& operator=(const CpuContention&) = delete;

  // The machine's, for every pool of the process; never destroyed (copy threads may still spin
  // while the process exits). A test may set another in its place before it makes the pools that
  // are to use it (nullptr: the machine's own again).
  static CpuContention& machine();
  static void set_machine(CpuContention* stand_in);

  // Whether more threads are runnable than there are CPUs, as last read (read again if the
  // answer is older than kRefreshNs at `now_ns`, a steady-clock time).
  bool contended(std::int64_t now_ns);

  // The runnable threads in a loadavg line ("0.52 0.58 0.59 17/1234 5678"); false if it is not one.
  static bool parse_runnable(const char* text, std::size_t length, unsigned* runnable);

  unsigned cpus() const { return cpus_; }
  // How many reads found the CPUs all taken, of how many (for tests and diagnostics).
  unsigned contended_reads() const { return contended_reads_.load(std::memory_order_relaxed); }
  unsigned reads() const { return reads_.load(std::memory_order_relaxed); }

 private:
  bool read_now();

  const std::string path_;
  KeptFile file_{path_.c_str()};  // a descriptor the program may close: kept_file.h
  bool readable_ = false;         // it could be read when this was made
  unsigned cpus_ = 1;
  alignas(64) std::atomic<std::int64_t> stale_at_ns_{INT64_MIN};
  std::atomic<bool> contended_{false};
  std::atomic<unsigned> reads_{0}, contended_reads_{0};
};

}  // namespace cmt
