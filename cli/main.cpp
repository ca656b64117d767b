// The `cmt` launcher. Thin: parses the command line with CLI11 and hands over to the commands.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "profile_command.h"
#include "run_command.h"
#include "topology.h"

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
    if (std::strcmp(argv[i], "--profile") == 0) ++i;  // its value is not the command
  }
  return argc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cmt: fast pageable host <-> GPU copies for unmodified programs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("cmt ") + CMT_VERSION);

  bool verbose = false;
  std::string run_profile;
  CLI::App* run = app.add_subcommand(
      "run",
      "Run a command with libcmt.so preloaded: cmt run [-v] [--profile FILE] -- CMD [ARGS...]");
  run->add_flag("-v,--verbose", verbose, "Print the effective configuration and log what cmt does");
  run->add_option("--profile", run_profile, "Use this profile (TOML); CMT_* variables still win");

  CLI::App* profile = app.add_subcommand("profile", "Check profiles and show the configuration");
  profile->require_subcommand(1);
  std::string validate_path, show_profile;
  CLI::App* validate = profile->add_subcommand("validate", "Check a profile file");
  validate->add_option("FILE", validate_path, "The profile (TOML)")->required();
  CLI::App* path = profile->add_subcommand(
      "path", "Print where this user's tuned profile for this machine lives");
  CLI::App* show = profile->add_subcommand(
      "show", "Print the effective configuration and where each value comes from");
  show->add_option("--profile", show_profile, "A profile to apply under the environment");

  bool topo_json = false;
  CLI::App* topo = app.add_subcommand(
      "topo", "Show the host's NUMA nodes, cores, core kinds and where each NVIDIA GPU sits");
  topo->add_flag("--json", topo_json, "Print JSON instead of a table");

  const int split = command_start(argc, argv);
  std::vector<std::string> command;
  for (int i = split; i < argc; ++i)
    if (i != split || std::strcmp(argv[i], "--") != 0) command.push_back(argv[i]);
  try {
    app.parse(split, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (run->parsed()) {
    if (!run_profile.empty()) {
      // Checked here, so a bad profile stops cmt with its reasons instead of being ignored later.
      if (cmt::cli::validate_profile(run_profile, true, "cmt run: ") != 0) return 2;
      setenv("CMT_PROFILE", run_profile.c_str(), 1);
    }
    return cmt::cli::run_command(command, verbose);
  }
  if (validate->parsed()) return cmt::cli::validate_profile(validate_path);
  if (path->parsed()) return cmt::cli::show_machine_profile_path();
  if (topo->parsed()) {
    cmt::HostTopology t = cmt::read_topology();
    std::fputs((topo_json ? cmt::topology_json(t) : cmt::format_topology(t)).c_str(), stdout);
    return t.error.empty() ? 0 : 1;
  }
  if (show->parsed()) {
    const char* env_profile = std::getenv("CMT_PROFILE");
    return cmt::cli::show_configuration(!show_profile.empty() ? show_profile
                                        : env_profile         ? env_profile
                                                              : "");
  }
  return 0;
}
