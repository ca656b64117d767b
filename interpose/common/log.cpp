#include "common/log.h"

#include <memory>
#include <mutex>

#include <fmt/args.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace cmt {
namespace {

spdlog::level::level_enum parse_level(const std::string& level) {
  if (level == "off") return spdlog::level::off;
  if (level == "error") return spdlog::level::err;
  if (level == "info") return spdlog::level::info;
  if (level == "debug") return spdlog::level::debug;
  return spdlog::level::warn;
}

spdlog::level::level_enum spdlog_level(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return spdlog::level::debug;
    case LogLevel::info:
      return spdlog::level::info;
    case LogLevel::error:
      return spdlog::level::err;
    default:
      return spdlog::level::warn;
  }
}

std::shared_ptr<spdlog::logger>& logger_slot() {
  // Never destroyed: hooks may log from static destructors of the host application.
  static auto* slot = new std::shared_ptr<spdlog::logger>();
  return *slot;
}

spdlog::logger& logger() {
  static std::once_flag once;
  std::call_once(once, [] {
    // A logger of our own, not registered globally, so the host's spdlog (if any) is untouched.
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto made = std::make_shared<spdlog::logger>("cmt", sink);
    made->set_pattern("[cmt] [%l] %v");
    made->set_level(spdlog::level::warn);
    logger_slot() = made;
  });
  return *logger_slot();
}

std::string format_line(std::string_view format, std::initializer_list<LogArg> args) {
  fmt::dynamic_format_arg_store<fmt::format_context> store;
  for (const LogArg& a : args) {
    switch (a.kind()) {
      case LogArg::Kind::Signed:
        store.push_back(a.as_signed());
        break;
      case LogArg::Kind::Unsigned:
        store.push_back(a.as_unsigned());
        break;
      case LogArg::Kind::Real:
        store.push_back(a.as_real());
        break;
      case LogArg::Kind::Flag:
        store.push_back(a.as_flag());
        break;
      case LogArg::Kind::Text:
        store.push_back(a.as_text());  // a view: the text outlives the call
        break;
      case LogArg::Kind::Pointer:
        store.push_back(a.as_pointer());
        break;
    }
  }
  try {
    return fmt::vformat(fmt::string_view(format.data(), format.size()), store);
  } catch (...) {
    return std::string(format);
  }
}

}  // namespace

bool log_enabled(LogLevel level) noexcept {
  try {
    return logger().should_log(spdlog_level(level));
  } catch (...) {
    return false;
  }
}

void log_line(LogLevel level, std::string_view format,
              std::initializer_list<LogArg> args) noexcept {
  try {
    logger().log(spdlog_level(level), format_line(format, args));
  } catch (...) {
  }
}

void set_log_level(const std::string& level) {
  try {
    logger().set_level(parse_level(level));
  } catch (...) {
  }
}

}  // namespace cmt
