#include "common/byte_size.h"

#include <cctype>
#include <limits>

namespace cmt {

bool parse_byte_size(std::string_view text, std::size_t* out) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 20) return false;
  unsigned long long value = 0;
  for (char c : text.substr(0, digits)) {
    const unsigned digit = static_cast<unsigned>(c - '0');
    if (value > (std::numeric_limits<unsigned long long>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  std::string suffix;
  for (char c : text.substr(digits))
    suffix += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      case 't':
        shift = 40;
        break;
      case 'b':
        shift = 0;
        break;
      default:
        return false;
    }
    const std::string rest = suffix.substr(1);
    if (suffix[0] == 'b' ? !rest.empty() : !(rest.empty() || rest == "b" || rest == "ib"))
      return false;
  }
  if (value > std::numeric_limits<std::size_t>::max() >> shift) return false;
  *out = static_cast<std::size_t>(value) << shift;
  return true;
}

std::string format_byte_size(std::size_t bytes) {
  static const char* const kSuffix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (i < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return std::to_string(bytes) + kSuffix[i];
}

}  // namespace cmt
