// Byte sizes as people write them: "4096", "64K", "2M", "1G", "2MiB", "1GB" in, "4M" out. The one
// parser and the one formatter of sizes for options, profiles, the tuner and the benchmarks.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cmt {

// An integer with an optional binary suffix (K, M, G, T; optional "iB" or "B"). False on anything
// else or on overflow.
bool parse_byte_size(std::string_view text, std::size_t* out);

// The largest whole unit: "4M", "256K", "1G"; plain bytes where no unit divides the size.
std::string format_byte_size(std::size_t bytes);

}  // namespace cmt
