// cmt's logging: one spdlog logger writing "[cmt] ..." lines to stderr, quiet by default
// (warnings only). It never throws and never allocates on a path that is not already logging.
#pragma once

#include <atomic>
#include <string>

#include <spdlog/spdlog.h>

namespace cmt {

// The logger, created on first use at the level set by set_log_level (default "warn").
spdlog::logger& log();
void set_log_level(const std::string& level);

}  // namespace cmt

// Logs a warning the first time this line runs and never again: a hook that steps aside says so
// once instead of once per call.
#define CMT_WARN_ONCE(...)                                        \
  do {                                                            \
    static std::atomic<bool> cmt_warned_{false};                  \
    if (!cmt_warned_.exchange(true, std::memory_order_relaxed)) { \
      try {                                                       \
        ::cmt::log().warn(__VA_ARGS__);                           \
      } catch (...) {                                             \
      }                                                           \
    }                                                             \
  } while (0)

#define CMT_LOG(level, ...)            \
  do {                                 \
    try {                              \
      ::cmt::log().level(__VA_ARGS__); \
    } catch (...) {                    \
    }                                  \
  } while (0)
