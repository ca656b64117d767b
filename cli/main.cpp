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
    if (std::strcmp(argv[i], "--profile") == 0) ++i;  // its value is not the command
  }
  return argc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cmt: fast pageable host <-> GPU copies for unmodified programs"};
  // At most one; none is reported after parsing, so that an unknown option is named first.
  app.require_subcommand(0, 1);
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
  bool options_markdown = false;
  CLI::App* options_cmd = profile->add_subcommand(
      "options", "List every option: variable, profile key, where it applies, default, meaning");
  options_cmd->add_flag("--markdown", options_markdown, "As the README's Markdown table");
  std::string export_output;
  CLI::App* export_cmd = profile->add_subcommand(
      "export", "Print this machine's tuned profile, checked, to contribute it to configs/");
  export_cmd->add_option("-o,--output", export_output, "Write it here instead of stdout");

  cmt::cli::TuneOptions tune_options;
  bool dry_run = false, no_confirm = false;
  CLI::App* tune = app.add_subcommand(
      "tune",
      "Measure this machine and write its profile: cmt tune [--search instant|full|grid] "
      "[-- CMD [ARGS...]]");
  tune->add_option("--search", tune_options.search,
                   "instant: a model from a few seconds of measurements; full: measured search "
                   "from there (Ctrl-C keeps the best so far); grid: every point of a small space")
      ->check(CLI::IsMember({"instant", "full", "grid"}));
  tune->add_option("--device", tune_options.device, "The GPU to tune on (CUDA ordinal)")
      ->check(CLI::NonNegativeNumber);
  tune->add_option("-o,--output", tune_options.output,
                   "Write the profile here instead of this user's profile for this machine");
  tune->add_option("--largest", tune_options.largest, "The largest copy measured (default 1G)");
  tune->add_flag("--dry-run", dry_run, "Measure and print the profile; write nothing");
  tune->add_flag("--no-confirm", no_confirm, "With a command: do not run it again to compare");
  tune->add_flag("--per-gpu", tune_options.per_gpu,
                 "Write this GPU's knobs under [gpu.\"BUS\"], merged into the profile: tune each "
                 "GPU of a machine in turn");

  // `cmt bench copy`: the copy benchmark (cmt-bench-copy, installed beside cmt), with the sizes
  // users ask about by default.
  std::string bench_sizes = "4K,16K,64K,256K,1M,4M,16M,64M,256M,1G,4G", bench_cases = "plain";
  std::string bench_json, bench_csv, bench_plot, bench_file_dir;
  int bench_reps = 5, bench_device = 0;
  CLI::App* bench = app.add_subcommand("bench", "Measure copies");
  bench->require_subcommand(1);
  CLI::App* bench_copy = bench->add_subcommand(
      "copy",
      "Pageable host <-> GPU copies: CUDA's default path vs cmt vs pinned, one process, bytes "
      "checked");
  bench_copy->add_option("--sizes", bench_sizes, "Copy sizes (default 4K..4G)");
  bench_copy->add_option("--reps", bench_reps, "Timed copies per size, mode and direction")
      ->check(CLI::Range(1, 1000));
  bench_copy->add_option("--device", bench_device, "The GPU (CUDA ordinal)")
      ->check(CLI::NonNegativeNumber);
  bench_copy->add_option("--cases", bench_cases,
                         "plain, fresh (D2H into new pages), mmap (H2D from a mapped file)");
  bench_copy->add_option("--file-dir", bench_file_dir, "Where the mmap case writes its file");
  int bench_gap_us = 0;
  bench_copy
      ->add_option("--gap-us", bench_gap_us,
                   "Idle this many microseconds before each timed copy, every mode alike, as a "
                   "program that computes between its copies (cmt's threads sleep after 1000)")
      ->check(CLI::Range(0, 10000000));
  std::string bench_api = "memcpy";
  int bench_batch_copies = 1;
  bench_copy
      ->add_option("--api", bench_api,
                   "memcpy (cudaMemcpy), or batch: each copy one cudaMemcpyBatchAsync on a stream")
      ->check(CLI::IsMember({"memcpy", "batch"}));
  bench_copy
      ->add_option("--batch-copies", bench_batch_copies,
                   "With --api batch: the parts of each copy, one batch entry each")
      ->check(CLI::Range(1, 4096));
  std::string bench_batch_order = "forward";
  bench_copy
      ->add_option("--batch-order", bench_batch_order,
                   "With --api batch: the parts in order (forward), or last to first (reverse), "
                   "so that none continues the one before it")
      ->check(CLI::IsMember({"forward", "reverse"}));
  bench_copy->add_option("--json", bench_json, "Write the results as JSON");
  bench_copy->add_option("--csv", bench_csv, "Write the results as CSV");
  bench_copy->add_option("--plot", bench_plot, "Draw GB/s against size as SVG (needs --json)");
  // Concurrent mode (cmt-bench-concurrent): N threads at once, each direction alone and both.
  int bench_threads = 0, bench_rounds = 3;
  double bench_seconds = 2;
  std::string bench_patterns = "h2d,d2h,both", bench_stream = "own";
  bench_copy
      ->add_option("--threads", bench_threads,
                   "Concurrent mode: this many host threads copy at once, each with its own "
                   "buffers and stream, started on a barrier (sizes default to 256M)")
      ->check(CLI::Range(1, 64));
  bench_copy->add_option("--patterns", bench_patterns,
                         "Concurrent mode: h2d, d2h and/or both (half the threads each way)");
  bench_copy->add_option("--seconds", bench_seconds, "Concurrent mode: each timed window")
      ->check(CLI::Range(0.1, 600.0));
  bench_copy->add_option("--rounds", bench_rounds, "Concurrent mode: windows per mode")
      ->check(CLI::Range(1, 100));
  bench_copy
      ->add_option("--stream", bench_stream,
                   "Concurrent mode: own (a stream per thread, cudaMemcpyAsync) or null "
                   "(cudaMemcpy on the legacy stream)")
      ->check(CLI::IsMember({"own", "null"}));

  // `cmt bench topo`: host <-> GPU bandwidth by GPU set (cmt-bench-concurrent --sets auto).
  std::string topo_sizes = "256M", topo_sets = "auto", topo_json_out, topo_plot;
  int topo_threads = 2, topo_rounds = 3;
  double topo_seconds = 3;
  CLI::App* bench_topo = bench->add_subcommand(
      "topo",
      "Host <-> GPU bandwidth of each GPU alone, of the GPUs behind each PCIe root port, of each "
      "NUMA node's GPUs together and of all at once, each way and both: default vs cmt vs "
      "pinned, barrier start, per-thread windows");
  bench_topo->add_option("--sizes", topo_sizes, "Copy sizes (default 256M)");
  bench_topo->add_option(
      "--sets", topo_sets,
      "The GPU sets, by CUDA ordinal: \"0;1;0,1\" measures GPU 0, GPU 1, then both at once "
      "(default auto: each GPU, each root port's GPUs, each NUMA node's, all)");
  bench_topo->add_option("--threads", topo_threads, "Threads per GPU (both ways: half each way)")
      ->check(CLI::Range(2, 64));
  bench_topo->add_option("--seconds", topo_seconds, "Each timed window")
      ->check(CLI::Range(0.1, 600.0));
  bench_topo->add_option("--rounds", topo_rounds, "Windows per mode")->check(CLI::Range(1, 100));
  bench_topo->add_option("--json", topo_json_out, "Write the results as JSON");
  bench_topo->add_option("--plot", topo_plot, "Draw them as SVG (needs --json)");

  // `cmt bench p2p`: cmt-bench-p2p, the matrices p2pBandwidthLatencyTest users expect.
  std::string p2p_bytes = "256M", p2p_json, p2p_sizes = "256K,512K,1M,4M,16M,64M,256M,1G";
  int p2p_reps = 10, p2p_rounds = 5;
  CLI::App* bench_p2p = bench->add_subcommand(
      "p2p",
      "GPU <-> GPU: the peer-access matrix, one-way and both-ways bandwidth and latency matrices "
      "with peer access disabled and enabled (CUDA's own), then cudaMemcpyPeer through the host, "
      "CUDA's path against cmt's, by size; bytes checked");
  bench_p2p->add_option("--bytes", p2p_bytes, "Bytes per bandwidth copy (default 256M)");
  bench_p2p->add_option("--reps", p2p_reps, "Copies per measurement")->check(CLI::Range(1, 10000));
  bench_p2p->add_option("--sizes", p2p_sizes,
                        "Sizes of the through-the-host comparison (default 256K..1G; 256K is the smallest cmt takes)");
  bench_p2p->add_option("--rounds", p2p_rounds, "Rounds of that comparison, CUDA and cmt alternating")
      ->check(CLI::Range(1, 1000));
  bench_p2p->add_option("--json", p2p_json, "Write the matrices and the comparison as JSON");

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
  if (app.get_subcommands().empty()) {
    std::fprintf(stderr, "cmt: a command is required: run, tune, bench, profile or topo\n%s",
                 app.help().c_str());
    return 2;
  }
  if (run->parsed()) {
    if (!run_profile.empty()) {
      // Checked here, so a bad profile stops cmt with its reasons instead of being ignored later.
      if (cmt::cli::validate_profile(run_profile, true, "cmt run: ") != 0) return 2;
      setenv("CMT_PROFILE", run_profile.c_str(), 1);
    }
    return cmt::cli::run_command(command, verbose);
  }
  if (tune->parsed()) {
    tune_options.write = !dry_run;
    tune_options.confirm = !no_confirm;
    tune_options.command = command;
    return cmt::cli::tune_command(tune_options);
  }
  if (bench_p2p->parsed()) {
    std::vector<std::string> args = {"--bytes", p2p_bytes, "--reps", std::to_string(p2p_reps),
                                     "--sizes", p2p_sizes, "--rounds", std::to_string(p2p_rounds)};
    if (!p2p_json.empty()) args.insert(args.end(), {"--json", p2p_json});
    return cmt::cli::run_tool("cmt-bench-p2p", args);
  }
  if (bench_topo->parsed()) {
    std::vector<std::string> args = {"--sets",     topo_sets,
                                     "--threads",  std::to_string(topo_threads),
                                     "--sizes",    topo_sizes,
                                     "--patterns", "h2d,d2h,both",
                                     "--seconds",  std::to_string(topo_seconds),
                                     "--rounds",   std::to_string(topo_rounds)};
    if (!topo_json_out.empty()) args.insert(args.end(), {"--json", topo_json_out});
    if (!topo_plot.empty()) args.insert(args.end(), {"--plot", topo_plot});
    return cmt::cli::run_tool("cmt-bench-concurrent", args);
  }
  if (bench_copy->parsed() && bench_threads > 0) {
    std::vector<std::string> args = {
        "--threads",  std::to_string(bench_threads),
        "--sizes",    bench_copy->count("--sizes") ? bench_sizes : "256M",
        "--patterns", bench_patterns,
        "--seconds",  std::to_string(bench_seconds),
        "--rounds",   std::to_string(bench_rounds),
        "--stream",   bench_stream,
        "--device",   std::to_string(bench_device)};
    if (!bench_json.empty()) args.insert(args.end(), {"--json", bench_json});
    if (!bench_plot.empty()) args.insert(args.end(), {"--plot", bench_plot});
    return cmt::cli::run_tool("cmt-bench-concurrent", args);
  }
  if (bench_copy->parsed()) {
    std::vector<std::string> args = {"--sizes",  bench_sizes,
                                     "--reps",   std::to_string(bench_reps),
                                     "--device", std::to_string(bench_device),
                                     "--cases",  bench_cases,
                                     "--gap-us", std::to_string(bench_gap_us),
                                     "--api",    bench_api};
    if (bench_api == "batch")
      args.insert(args.end(), {"--batch-copies", std::to_string(bench_batch_copies),
                               "--batch-order", bench_batch_order});
    for (auto [flag, value] : {std::pair<const char*, std::string*>{"--json", &bench_json},
                               {"--csv", &bench_csv},
                               {"--plot", &bench_plot},
                               {"--file-dir", &bench_file_dir}})
      if (!value->empty()) args.insert(args.end(), {flag, *value});
    return cmt::cli::run_tool("cmt-bench-copy", args);
  }
  if (validate->parsed()) return cmt::cli::validate_profile(validate_path);
  if (path->parsed()) return cmt::cli::show_machine_profile_path();
  if (export_cmd->parsed()) return cmt::cli::export_profile(export_output);
  if (options_cmd->parsed()) return cmt::cli::show_options(options_markdown);
  if (topo->parsed()) {
    cmt::HostTopology t = cmt::read_topology();
    std::fputs((topo_json ? cmt::topology_json(t) : cmt::format_topology(t)).c_str(), stdout);
    return t.error.empty() ? 0 : 1;
  }
  if (show->parsed()) {
    return cmt::cli::show_configuration(show_profile);
  }
  return 0;
}
