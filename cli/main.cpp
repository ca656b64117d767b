// The `cmt` launcher. Thin: parses the command line with CLI11 and hands over to the commands.
#include <CLI/CLI.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "run_command.h"

namespace {

// `cmt run [-v] [--] CMD ARGS...`: CMD starts after "--", or at the first word after "run" that
// is not an option. Everything from there belongs to CMD, so CLI11 only sees what comes before.
int command_start(int argc, char** argv) {
  int i = 1;
  while (i < argc && argv[i][0] == '-') ++i;  // cmt's own options before the subcommand
  if (i >= argc || std::strcmp(argv[i], "run") != 0) return argc;
  for (++i; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return i;
    if (argv[i][0] != '-') return i;
  }
  return argc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cmt: fast pageable host <-> GPU copies for unmodified programs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("cmt ") + CMT_VERSION);

  bool verbose = false;
  CLI::App* run = app.add_subcommand(
      "run", "Run a command with libcmt.so preloaded: cmt run [-v] -- CMD [ARGS...]");
  run->add_flag("-v,--verbose", verbose, "Print the effective configuration and log what cmt does");

  const int split = command_start(argc, argv);
  std::vector<std::string> command;
  for (int i = split; i < argc; ++i)
    if (i != split || std::strcmp(argv[i], "--") != 0) command.push_back(argv[i]);
  try {
    app.parse(split, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (run->parsed()) return cmt::cli::run_command(command, verbose);
  return 0;
}
