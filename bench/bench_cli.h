// The benchmarks' command lines, parsed with CLI11. Each benchmark declares its flags once, in its
// own program; `cmt bench copy|topo|p2p` hands them its arguments untouched, so a flag, its range
// and its help are written in one place, and `cmt bench copy --help` is the benchmark's own.
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "common/byte_size.h"

namespace cmt::bench {

// "4K,1M,1G" as byte counts, each positive; `flag` names the option in the message.
inline std::vector<std::size_t> parse_sizes(const std::string& list, const std::string& flag) {
  std::vector<std::size_t> out;
  std::string item;
  for (std::size_t at = 0; at <= list.size(); ++at) {
    if (at < list.size() && list[at] != ',') {
      item += list[at];
      continue;
    }
    std::size_t bytes = 0;
    if (!parse_byte_size(item, &bytes) || bytes == 0)
      throw CLI::ValidationError(
          flag, "bad size '" + item + "' for " + flag + " (expected a size such as 256M)");
    out.push_back(bytes);
    item.clear();
  }
  return out;
}

// An option taking a comma-separated list of sizes into `sizes` (which holds its default).
inline CLI::Option* add_sizes(CLI::App& app, const std::string& flag,
                              std::vector<std::size_t>* sizes, const std::string& help) {
  std::string shown;
  for (std::size_t s : *sizes) shown += (shown.empty() ? "" : ",") + format_byte_size(s);
  return app
      .add_option_function<std::string>(
          flag, [sizes, flag](const std::string& list) { *sizes = parse_sizes(list, flag); }, help)
      ->type_name("SIZES")
      ->default_str(shown);
}

// The same for one size.
inline CLI::Option* add_size(CLI::App& app, const std::string& flag, std::size_t* bytes,
                             const std::string& help) {
  return app
      .add_option_function<std::string>(
          flag,
          [bytes, flag](const std::string& text) {
            const std::vector<std::size_t> one = parse_sizes(text, flag);
            if (one.size() != 1) throw CLI::ValidationError(flag, "one size expected");
            *bytes = one[0];
          },
          help)
      ->type_name("SIZE")
      ->default_str(format_byte_size(*bytes));
}

// Parses the command line: -1 to go on; otherwise the status to exit with: 0 after --help, 2
// after a usage error, which is printed with the program's name.
inline int parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return -1;
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\n", app.get_name().c_str(), e.what());
    std::fprintf(stderr, "run with --help for the options\n");
    return 2;
  }
}

}  // namespace cmt::bench
