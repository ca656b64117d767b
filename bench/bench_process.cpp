#include "bench_process.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "config/fingerprint.h"
#include "config/profile.h"

namespace cmt::bench {
namespace {

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, why.c_str());
  std::exit(2);
}

}  // namespace

std::string object_of(const void* addr) {
  Dl_info info{};
  if (dladdr(addr, &info) && info.dli_fname) return info.dli_fname;
  return "?";
}

std::string self_dir() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return ".";
  std::string dir(self, static_cast<size_t>(n));
  return dir.substr(0, dir.find_last_of('/'));
}

void ensure_preloaded(char** argv) {
  if (object_of(reinterpret_cast<const void*>(&cudaMemcpy)).find("libcmt.so") != std::string::npos)
    return;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) fail("cannot find my own path to locate libcmt.so");
  self[n] = 0;
  const std::string lib = self_dir() + "/libcmt.so";
  if (access(lib.c_str(), R_OK) != 0) fail("libcmt.so not found at " + lib);
  if (getenv("CMT_BENCH_REEXEC")) fail("libcmt.so is preloaded but cudaMemcpy is not its hook");
  std::string preload = lib;
  // libcmt-release.so too where hot buffers are on, as `cmt run` preloads it: without its hooks
  // (which drop a registration before its pages change) libcmt.so registers nothing, and
  // `CMT_REGISTER=hot cmt bench ...` measured staging.
  const LoadedConfiguration loaded = load_configuration("", read_fingerprint());
  const std::string release = self_dir() + "/libcmt-release.so";
  if (loaded.config.register_mode != Register::Off && !loaded.config.disable &&
      access(release.c_str(), R_OK) == 0)
    preload += ":" + release;
  if (const char* old = getenv("LD_PRELOAD")) preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("CMT_BENCH_REEXEC", "1", 1);
  execv(self, argv);
  fail("cannot re-execute with libcmt.so preloaded");
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace cmt::bench
