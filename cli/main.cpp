// The `cmt` launcher. Thin: parses the command line with CLI11 and hands over to the commands.
// The benchmarks (`cmt bench copy|topo|p2p`) parse their own flags: their arguments are handed
// over untouched, so each flag is declared once, in its benchmark.
#include <CLI/CLI.hpp>

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "profile_command.h"
#include "run_command.h"
#include "trace_command.h"
#include "topology.h"
#include "tune_command.h"

namespace {

// `cmt run [-v] [--] CMD ARGS...`: CMD starts after "--", or at the first word after "run" that
// is not an option. `cmt tune [...] -- CMD ARGS...`: CMD starts after "--". Everything from
// there belongs to CMD, so CLI11 only sees what comes before.
int command_start(int argc, char** argv) {
  int i = 1;
  while (i < argc && argv[i][0] == '-') ++i;  // cmt's own options before the subcommand
  if (i >= argc) return argc;
  if (std::strcmp(argv[i], "tune") == 0) {
    for (++i; i < argc; ++i)
      if (std::strcmp(argv[i], "--") == 0) return i;
    return argc;
  }
  if (std::strcmp(argv[i], "run") != 0) return argc;
  for (++i; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return i;
    if (argv[i][0] != '-') return i;
    if (std::strcmp(argv[i], "--profile") == 0 || std::strcmp(argv[i], "--record") == 0)
      ++i;  // its value is not the command
  }
  return argc;
}

// What a parsed command line runs; set by the subcommand that was given.
using Action = std::function<int()>;

void add_run(CLI::App& app, Action* action, const std::vector<std::string>& command) {
  auto* run = app.add_subcommand(
      "run",
      "Run a command with libcmt.so preloaded: cmt run [-v] [--profile FILE] [--record FILE] -- "
      "CMD [ARGS...]");
  static bool verbose = false;
  static std::string profile, record;
  run->add_flag("-v,--verbose", verbose,
                "Print the effective configuration, log what cmt does, and end with the totals of "
                "the command's processes (CMD then runs as a child)");
  run->add_option("--profile", profile, "Use this profile (TOML); CMT_* variables still win");
  run->add_option("--record", record,
                  "Record every copy of the command's processes into this file (cmt trace show "
                  "FILE summarizes it); CMD then runs as a child");
  run->callback([action, command] {
    *action = [command] {
      if (!profile.empty()) {
        // Checked here, so a bad profile stops cmt with its reasons instead of being ignored.
        if (cmt::cli::validate_profile(profile, true, "cmt run: ") != 0) return 2;
        setenv("CMT_PROFILE", profile.c_str(), 1);
      }
      return cmt::cli::run_command(command, verbose, record);
    };
  });
}

void add_trace(CLI::App& app, Action* action) {
  auto* trace = app.add_subcommand("trace", "Read traces that cmt run --record wrote");
  trace->require_subcommand(1);
  static std::vector<std::string> files;
  trace->add_subcommand("show", "Summarize traces: time in and between copies, sizes, what cmt "
                                "took and at what rate, what it left to CUDA and why")
      ->callback([action] { *action = [] { return cmt::cli::trace_show(files); }; })
      ->add_option("FILE", files, "Trace files (read together)")
      ->required();
}

void add_profile(CLI::App& app, Action* action) {
  auto* profile = app.add_subcommand("profile", "Check profiles and show the configuration");
  profile->require_subcommand(1);
  static std::string validate_path, show_profile, export_output;
  static bool markdown = false;
  profile->add_subcommand("validate", "Check a profile file")
      ->callback([action] { *action = [] { return cmt::cli::validate_profile(validate_path); }; })
      ->add_option("FILE", validate_path, "The profile (TOML)")
      ->required();
  profile->add_subcommand("path", "Print where this user's tuned profile for this machine lives")
      ->callback([action] { *action = [] { return cmt::cli::show_machine_profile_path(); }; });
  profile
      ->add_subcommand("show", "Print the effective configuration and where each value comes from")
      ->callback([action] { *action = [] { return cmt::cli::show_configuration(show_profile); }; })
      ->add_option("--profile", show_profile, "A profile to apply under the environment");
  profile
      ->add_subcommand(
          "options", "List every option: variable, profile key, where it applies, default, meaning")
      ->callback([action] { *action = [] { return cmt::cli::show_options(markdown); }; })
      ->add_flag("--markdown", markdown, "As the README's Markdown table");
  profile
      ->add_subcommand("export",
                       "Print this machine's tuned profile, checked, to contribute it to configs/")
      ->callback([action] { *action = [] { return cmt::cli::export_profile(export_output); }; })
      ->add_option("-o,--output", export_output, "Write it here instead of stdout");
}

void add_tune(CLI::App& app, Action* action, const std::vector<std::string>& command) {
  static cmt::cli::TuneOptions o;
  static bool dry_run = false, no_confirm = false;
  auto* tune = app.add_subcommand(
      "tune",
      "Measure this machine and write its profile: cmt tune [--search instant|full|grid] "
      "[--trace FILE | -- CMD [ARGS...]]");
  tune->add_option("--search", o.search,
                   "instant: a model from a few seconds of measurements; full: measured search "
                   "from there (Ctrl-C keeps the best so far); grid: every point of a small space")
      ->check(CLI::IsMember({"instant", "full", "grid"}));
  tune->add_option("--device", o.device, "The GPU to tune on (CUDA ordinal)")
      ->check(CLI::Range(0, 1023));
  tune->add_option("-o,--output", o.output,
                   "Write the profile here instead of this user's profile for this machine");
  tune->add_option("--largest", o.largest, "The largest copy measured (default 1G)");
  tune->add_option("--trace", o.trace,
                   "Tune for the copies of a trace that cmt run --record wrote (instead of a "
                   "command)");
  tune->add_flag("--dry-run", dry_run, "Measure and print the profile; write nothing");
  tune->add_flag("--no-confirm", no_confirm, "With a command: do not run it again to compare");
  tune->add_flag("--per-gpu", o.per_gpu,
                 "Write this GPU's knobs under [gpu.\"BUS\"], merged into the profile: tune each "
                 "GPU of a machine in turn");
  tune->callback([action, command] {
    o.write = !dry_run;
    o.confirm = !no_confirm;
    o.command = command;
    *action = [] { return cmt::cli::tune_command(o); };
  });
}

// `cmt bench NAME ARGS...` runs the benchmark program with ARGS as they are (its --help too).
// `copy` is cmt-bench-copy, with --threads cmt-bench-concurrent, with --processes
// cmt-bench-processes; `topo` is cmt-bench-concurrent with cmt bench topo's defaults.
void add_bench(CLI::App& app, Action* action) {
  auto* bench =
      app.add_subcommand("bench", "Measure copies (each benchmark's --help lists its flags)");
  bench->require_subcommand(1);
  struct Route {
    const char *name, *help;
  };
  for (const Route r :
       {Route{"copy",
              "Pageable host <-> GPU copies: CUDA's default path vs cmt vs pinned, one "
              "process, bytes checked; with --threads N, N host threads at once; with "
              "--processes N, N processes at once"},
        Route{"topo",
              "Host <-> GPU bandwidth of each GPU alone, of the GPUs behind each PCIe "
              "root port, of each NUMA node's GPUs together and of all at once"},
        Route{"p2p",
              "GPU <-> GPU: peer access, bandwidth and latency matrices, and "
              "cudaMemcpyPeer through the host, CUDA's path against cmt's"},
        Route{"replay",
              "A trace that cmt run --record wrote, made again: the same copies, host memory "
              "and gaps, CUDA's default path vs cmt vs pinned, one process, bytes checked"}}) {
    auto* sub = bench->add_subcommand(r.name, r.help);
    sub->prefix_command();
    sub->set_help_flag();  // --help is the benchmark's
    const std::string name = r.name;
    sub->callback([action, sub, name] {
      std::vector<std::string> args = sub->remaining();
      auto has = [&args](const std::string& flag) {
        return std::any_of(args.begin(), args.end(), [&flag](const std::string& a) {
          return a == flag || a.rfind(flag + "=", 0) == 0;
        });
      };
      const bool threads = has("--threads"), processes = has("--processes");
      std::string tool = "cmt-bench-copy";
      if (name == "topo") {
        tool = "cmt-bench-concurrent";
        args.insert(args.begin(), "--topo");
      } else if (name == "p2p") {
        tool = "cmt-bench-p2p";
      } else if (name == "replay") {
        tool = "cmt-bench-replay";
      } else if (processes) {
        tool = "cmt-bench-processes";  // which refuses --threads, naming it
      } else if (threads) {
        tool = "cmt-bench-concurrent";
      }
      *action = [tool, args] { return cmt::cli::run_tool(tool, args); };
    });
  }
}

void add_topo(CLI::App& app, Action* action) {
  static bool json = false;
  auto* topo = app.add_subcommand(
      "topo", "Show the host's NUMA nodes, cores, core kinds and where each NVIDIA GPU sits");
  topo->add_flag("--json", json, "Print JSON instead of a table");
  topo->callback([action] {
    *action = [] {
      const cmt::HostTopology t = cmt::read_topology();
      std::fputs((json ? cmt::topology_json(t) : cmt::format_topology(t)).c_str(), stdout);
      return t.error.empty() ? 0 : 1;
    };
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cmt: fast pageable host <-> GPU copies for unmodified programs"};
  // At most one; none is reported after parsing, so that an unknown option is named first.
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string("cmt ") + CMT_VERSION);
  const int split = command_start(argc, argv);
  std::vector<std::string> command;
  for (int i = split; i < argc; ++i)
    if (i != split || std::strcmp(argv[i], "--") != 0) command.push_back(argv[i]);
  Action action;
  add_run(app, &action, command);
  add_profile(app, &action);
  add_trace(app, &action);
  add_tune(app, &action, command);
  add_bench(app, &action);
  add_topo(app, &action);
  try {
    app.parse(split, argv);
  } catch (const CLI::ParseError& e) {
    // Help and --version are CLI11's to print; a usage error is cmt's, with cmt's status 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "cmt: %s\nrun 'cmt --help' (or 'cmt COMMAND --help') for the usage\n",
                 e.what());
    return 2;
  }
  if (!action) {
    std::fprintf(stderr, "cmt: a command is required: run, tune, bench, profile or topo\n%s",
                 app.help().c_str());
    return 2;
  }
  return action();
}
