// cmt's logging: "[cmt] [level] ..." lines to stderr, quiet by default (warnings only), written
// by one spdlog logger of cmt's own. Only log.cpp sees spdlog and fmt: a log line's arguments
// travel as LogArgs and are formatted there ("{}" placeholders, fmt's syntax), so the rest of
// the code compiles without spdlog's header-only implementation in every file. Logging never
// throws and costs one level check when the line is not wanted.
#pragma once

#include <atomic>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

namespace cmt {

// The levels CMT_LOG names (CMT_LOG(debug, ...)).
enum class LogLevel { debug, info, warn, error };

// One argument of a log line, by value or by reference to what lives until the line is written.
class LogArg {
 public:
  enum class Kind { Signed, Unsigned, Real, Flag, Text, Pointer };
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  LogArg(T v) : kind_(std::is_signed_v<T> ? Kind::Signed : Kind::Unsigned) {
    if constexpr (std::is_signed_v<T>)
      signed_ = v;
    else
      unsigned_ = v;
  }
  template <typename E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
  LogArg(E v) : kind_(Kind::Signed), signed_(static_cast<long long>(v)) {}
  LogArg(bool v) : kind_(Kind::Flag), flag_(v) {}
  LogArg(double v) : kind_(Kind::Real), real_(v) {}
  LogArg(const char* v) : kind_(Kind::Text), text_(v ? v : "(null)") {}
  LogArg(const std::string& v) : kind_(Kind::Text), text_(v) {}
  LogArg(std::string_view v) : kind_(Kind::Text), text_(v) {}
  LogArg(const void* v) : kind_(Kind::Pointer), pointer_(v) {}

  Kind kind() const { return kind_; }
  long long as_signed() const { return signed_; }
  unsigned long long as_unsigned() const { return unsigned_; }
  double as_real() const { return real_; }
  bool as_flag() const { return flag_; }
  std::string_view as_text() const { return text_; }
  const void* as_pointer() const { return pointer_; }

 private:
  Kind kind_;
  union {
    long long signed_;
    unsigned long long unsigned_;
    double real_;
    bool flag_;
    const void* pointer_;
  };
  std::string_view text_;
};

// Whether a line at `level` would be written (the level set by set_log_level; default warn).
bool log_enabled(LogLevel level) noexcept;
// Writes `format` with its "{}" replaced by `args`; a format that does not fit its arguments is
// written as it stands. Never throws.
void log_line(LogLevel level, std::string_view format, std::initializer_list<LogArg> args) noexcept;
// "off", "error", "warn", "info" or "debug"; anything else means warn.
void set_log_level(const std::string& level);

template <typename... Args>
void log_with(LogLevel level, std::string_view format, const Args&... args) noexcept {
  log_line(level, format, {LogArg(args)...});
}

}  // namespace cmt

// Logs a warning the first time this line runs and never again: a hook that steps aside says so
// once instead of once per call.
#define CMT_WARN_ONCE(...)                                      \
  do {                                                          \
    static std::atomic<bool> cmt_warned_{false};                \
    if (!cmt_warned_.exchange(true, std::memory_order_relaxed)) \
      ::cmt::log_with(::cmt::LogLevel::warn, __VA_ARGS__);      \
  } while (0)

#define CMT_LOG(level, ...)                                 \
  do {                                                      \
    if (::cmt::log_enabled(::cmt::LogLevel::level))         \
      ::cmt::log_with(::cmt::LogLevel::level, __VA_ARGS__); \
  } while (0)
