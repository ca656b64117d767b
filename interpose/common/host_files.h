// Reading the small one-line files of /proc and /sys (numa_node, vendor, link speed ...).
#pragma once

#include <string>

namespace cmt {

// The file's first line without trailing whitespace; "" if it cannot be read.
std::string read_first_line(const std::string& path);

}  // namespace cmt
