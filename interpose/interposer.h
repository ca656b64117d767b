// The state libcmt.so keeps inside a host process: configuration read once from CMT_*, the engine
// (built on the first copy worth taking), statistics, and fork/exit handling. Hooks ask it to
// take a copy; it answers how many leading bytes it handled, and the hook forwards the rest.
// Nothing here throws, exits or aborts.
#pragma once

#include <cstddef>

#include "driver_api.h"
#include "options.h"
#include "stats.h"

namespace cmt {

class Interposer {
 public:
  // The process-wide instance. It is never destroyed: hooks may run from the application's
  // static destructors, after the CUDA driver is gone.
  static Interposer& instance();

  // Tries to run the copy through the engine. Returns the number of leading bytes handled (0:
  // forward the whole call untouched). `stream` must be explicit (legacy or per-thread handle
  // for the default stream).
  std::size_t try_copy(void* dst, const void* src, std::size_t bytes, int kind, CUstream stream,
                       bool synchronous, Entry entry) noexcept;

  const Config& config() const { return config_; }
  Stats& stats() { return *stats_; }

  // Builds an instance over a given driver (tests); `instance()` uses the real one.
  Interposer(const DriverApi* driver, const Config& config);

 private:
  Interposer();
  class CopyEngine* engine();

  Config config_;
  const DriverApi* driver_ = nullptr;
  bool driver_loaded_ = false;
  class CopyEngine* engine_ = nullptr;
  Stats* stats_ = nullptr;
};

}  // namespace cmt
