#include "common/log.h"

#include <memory>
#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>

namespace cmt {
namespace {

spdlog::level::level_enum parse_level(const std::string& level) {
  if (level == "off") return spdlog::level::off;
  if (level == "error") return spdlog::level::err;
  if (level == "info") return spdlog::level::info;
  if (level == "debug") return spdlog::level::debug;
  return spdlog::level::warn;
}

std::shared_ptr<spdlog::logger>& logger_slot() {
  // Never destroyed: hooks may log from static destructors of the host application.
  static auto* slot = new std::shared_ptr<spdlog::logger>();
  return *slot;
}

std::once_flag& logger_once() {
  static std::once_flag once;
  return once;
}

}  // namespace

spdlog::logger& log() {
  std::call_once(logger_once(), [] {
    // A logger of our own, not registered globally, so the host's spdlog (if any) is untouched.
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto logger = std::make_shared<spdlog::logger>("cmt", sink);
    logger->set_pattern("[cmt] [%l] %v");
    logger->set_level(spdlog::level::warn);
    logger_slot() = logger;
  });
  return *logger_slot();
}

void set_log_level(const std::string& level) {
  log().set_level(parse_level(level));
}

}  // namespace cmt
