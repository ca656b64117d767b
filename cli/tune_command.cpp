#include "tune_command.h"

#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "config/fingerprint.h"
#include "config/profile.h"
#include "profile_writer.h"
#include "run_command.h"
#include "topology.h"
#include "tune.h"

extern char** environ;

namespace cmt::cli {
namespace {

std::atomic<bool> g_stop{false};

// Ctrl-C during a search: stop at the next measurement and keep the best so far; a second one
// ends cmt at once.
void on_interrupt(int) {
  g_stop.store(true);
  signal(SIGINT, SIG_DFL);
}

void draw_progress(const TuneProgress& p) {
  static auto last = std::chrono::steady_clock::time_point{};
  const bool tty = isatty(STDERR_FILENO);
  auto now = std::chrono::steady_clock::now();
  if (!tty && p.done != p.total && now - last < std::chrono::seconds(5)) return;
  last = now;
  const int width = 24;
  const int filled = p.total ? p.done * width / p.total : 0;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "%s[%s] %d/%d  best %.1f GB/s  %s%s", tty ? "\r\033[K" : "", bar.c_str(),
               p.done, p.total, p.best_gbps, p.trying.c_str(), tty ? "" : "\n");
  if (tty && p.done == p.total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

// The other GPUs whose local cores (by hwloc) are the same as `session`'s, opened with room for
// measure_gpu_cores' buffers (a GPU that cannot be opened is left out, with a note). The calling
// thread's current context is `session`'s again afterwards.
std::vector<std::unique_ptr<CudaSession>> open_gpus_on_same_cores(const CudaSession& session,
                                                                  const HostTopology& topology,
                                                                  std::vector<std::string>* notes) {
  const GpuPlacement* mine = nullptr;
  for (const GpuPlacement& g : topology.gpus)
    if (strcasecmp(g.pci_bus_id.c_str(), session.pci_bus_id().c_str()) == 0) mine = &g;
  std::vector<std::unique_ptr<CudaSession>> out;
  if (!mine || mine->local_cpus.empty()) return out;
  const DriverApi& api = session.driver();
  int count = 0;
  if (api.device_get_count(&count) != CUDA_SUCCESS) return out;
  for (int d = 0; d < count; ++d) {
    CUdevice dev = 0;
    char bus[64] = {};
    if (api.device_get(&dev, d) != CUDA_SUCCESS ||
        api.device_get_pci_bus_id(bus, sizeof(bus), dev) != CUDA_SUCCESS ||
        strcasecmp(bus, session.pci_bus_id().c_str()) == 0)
      continue;
    const bool same_cores =
        std::any_of(topology.gpus.begin(), topology.gpus.end(), [&](const auto& g) {
          return strcasecmp(g.pci_bus_id.c_str(), bus) == 0 && g.local_cpus == mine->local_cpus;
        });
    if (!same_cores) continue;
    std::string error;
    if (auto other = CudaSession::open(d, 128u << 20, &error))
      out.push_back(std::move(other));
    else
      notes->push_back("gpu_cores: GPU " + std::to_string(d) + " left out: " + error);
  }
  (void)api.ctx_set_current(session.context());
  return out;
}

std::string utc_now() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

bool make_parents(const std::string& path) {
  for (std::size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
    std::string dir = path.substr(0, at);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

struct ChildRun {
  int status = -1;  // exit status, or 128 + signal
  double seconds = 0;
};

// Runs `command` with libcmt.so preloaded and `extra` added to the environment; waits for it.
ChildRun run_child(const std::vector<std::string>& command, const std::string& library,
                   const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.push_back(*e);
  env.push_back("LD_PRELOAD=" + preload_value(library, std::getenv("LD_PRELOAD")));
  for (const std::string& e : extra) env.push_back(e);
  std::vector<char*> envp, argv;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ChildRun out;
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) != 0) return out;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

// A directory of this user's alone (mkdtemp: mode 0700, a fresh name) for the watched run's
// statistics, removed with what is in it when the tune ends.
class PrivateTempDir {
 public:
  PrivateTempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cmt-tune-XXXXXX";
    if (mkdtemp(pattern.data())) path_ = pattern;
  }
  ~PrivateTempDir() {
    if (path_.empty()) return;
    if (DIR* d = opendir(path_.c_str())) {
      while (dirent* e = readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
          unlinkat(dirfd(d), e->d_name, 0);
      closedir(d);
    }
    rmdir(path_.c_str());
  }
  PrivateTempDir(const PrivateTempDir&) = delete;
  PrivateTempDir& operator=(const PrivateTempDir&) = delete;
  // "" if no directory could be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

int tune_command(const TuneOptions& o) {
  const char* me = "cmt tune: ";
  std::size_t largest = 0;
  if (!parse_byte_size(o.largest, &largest) || largest < (4u << 20)) {
    std::fprintf(stderr,
                 "%s--largest '%s' is not valid: expected a size of at least 4M (e.g. 1G)\n", me,
                 o.largest.c_str());
    return 2;
  }
  // The instant search measures copies up to 64 MiB: its promise is seconds.
  if (o.search == "instant") largest = std::min<std::size_t>(largest, 64u << 20);
  const auto start = std::chrono::steady_clock::now();
  const MachineFingerprint machine = read_fingerprint();
  std::string no_library;
  const std::string library = find_library(&no_library);

  // 1. The mix: the command's own copies if there is one, else a spread of sizes.
  CopyMix mix = default_mix(largest);
  if (!o.command.empty()) {
    if (library.empty()) {
      std::fprintf(stderr, "%s%s\n", me, no_library.c_str());
      return 2;
    }
    const PrivateTempDir scratch;
    if (scratch.path().empty()) {
      std::fprintf(stderr, "%scannot make a temporary directory: %s\n", me, std::strerror(errno));
      return 1;
    }
    const std::string stats = scratch.path() + "/stats.json";
    std::fprintf(stderr, "%swatching the copies of: %s ...\n", me, o.command[0].c_str());
    // A low threshold lets the engine see (and take) every pageable copy worth tuning for.
    ChildRun watched = run_child(
        o.command, library, {"CMT_STATS=" + stats, "CMT_THRESHOLD=64K", "CMT_D2H_THRESHOLD=64K"});
    if (watched.status != 0) {
      std::fprintf(stderr, "%sthe command %s (status %d); nothing was tuned\n", me,
                   watched.status < 0 ? "could not be started" : "failed", watched.status);
      return watched.status < 0 ? 127 : 1;
    }
    std::string error;
    mix = mix_from_stats(stats, largest, &error);
    if (mix.empty()) {
      std::fprintf(stderr, "%s%s; nothing to tune for\n", me, error.c_str());
      return 1;
    }
    std::fprintf(stderr, "%sits copies (share of bytes): %s\n", me, describe_mix(mix).c_str());
  }
  std::size_t need = 0;
  for (const CopyCase& c : mix) need = std::max(need, c.bytes);
  need = std::max<std::size_t>(need, 64u << 20);

  // 2. Measure and search.
  std::string error;
  auto session = CudaSession::open(o.device, need, &error);
  if (!session) {
    std::fprintf(stderr, "%s%s\n", me, error.c_str());
    return 1;
  }
  std::fprintf(stderr, "%sGPU %d: %s (%s), search '%s'\n", me, o.device, session->name().c_str(),
               session->pci_bus_id().c_str(), o.search.c_str());
  CopyBench bench(*session, need);
  HostTopology topology = read_topology();
  TuneResult result = tune_instant(bench, *session, topology);
  std::vector<std::string> notes = result.notes;
  // Each configuration a search tries: the mix, three timed copies of each case.
  const ScoreFn measured = [&](const Config& c) { return bench.cmt_score(c, mix, 3); };
  signal(SIGINT, on_interrupt);
  unsigned local = 0;  // the GPU's local cores
  std::vector<int> local_cpus;
  for (const GpuPlacement& g : topology.gpus)
    if (strcasecmp(g.pci_bus_id.c_str(), session->pci_bus_id().c_str()) == 0) {
      local = static_cast<unsigned>(g.local_cpus.size());
      local_cpus = g.local_cpus;
    }
  if (!local) local = static_cast<unsigned>(std::max(1, topology.processing_units));
  if (o.search == "full") {
    result = tune_full(measured, result, local > 1 ? local - 1 : 1, draw_progress, g_stop);
    notes.insert(notes.end(), result.notes.begin(), result.notes.end());
  } else if (o.search == "grid") {
    // The yardstick for the full search: every point of a small space, then the full search from
    // the instant estimate, then both winners measured again, alternately, for a fair ratio.
    TuneResult instant = result;
    result = tune_grid(measured, draw_progress, g_stop);
    notes.insert(notes.end(), result.notes.begin(), result.notes.end());
    if (!result.interrupted) {
      TuneResult full = tune_full(measured, instant, 15, draw_progress, g_stop);
      std::vector<double> g, f;
      for (int round = 0; round < 5 && !g_stop.load(); ++round) {
        g.push_back(bench.cmt_score(result.config, mix, 3));
        f.push_back(bench.cmt_score(full.config, mix, 3));
      }
      std::sort(g.begin(), g.end());
      std::sort(f.begin(), f.end());
      if (!g.empty()) {
        char buf[256];
        std::snprintf(buf, sizeof(buf),
                      "check: the full search's choice (%u threads, %s x %u, H2D %s, D2H %s) "
                      "%.1f GB/s vs the grid's best %.1f GB/s, measured again alternately: "
                      "full/grid = %.3f",
                      full.config.threads, format_byte_size(full.config.chunk_bytes).c_str(),
                      full.config.slots, copy_method_name(full.config.h2d_method),
                      copy_method_name(full.config.d2h_method), f[f.size() / 2], g[g.size() / 2],
                      f[f.size() / 2] / std::max(1e-9, g[g.size() / 2]));
        notes.push_back(buf);
      }
    }
  } else {
    result.score_gbps = bench.cmt_score(result.config, mix, 3);
  }
  Config builtin_here;  // the built-in defaults, with the threads they resolve to on this GPU
  builtin_here.threads = auto_threads(local);
  if (o.search == "instant" && same_lane_knobs(result.config, builtin_here)) {
    notes.push_back("confirm: not needed, the model's choice is the built-in defaults");
  } else if (o.search != "grid") {
    // Never slower than no profile: the choice must beat the built-in defaults by 2%, measured
    // alternately (5 rounds after a full search, 3 after the estimate, which has seconds).
    const std::size_t had = result.notes.size();
    result = confirm_against_builtin(measured, result, o.search == "full" ? 5 : 3, 1.02, g_stop);
    notes.insert(notes.end(), result.notes.begin() + static_cast<long>(had), result.notes.end());
    // The defaults' "0 threads" spelled out as the engine resolves it here, so that the profile
    // says what runs.
    if (!result.config.threads) result.config.threads = auto_threads(local);
  }
  signal(SIGINT, SIG_DFL);
  if (result.interrupted) std::fprintf(stderr, "%sinterrupted: keeping the best so far\n", me);
  const PickedThresholds thresholds = pick_thresholds(bench, result.config, &notes);
  result.config.threshold = thresholds.always.h2d;
  result.config.d2h_threshold = thresholds.always.d2h;
  result.config.warm_threshold = thresholds.warm.h2d;
  result.config.d2h_warm_threshold = thresholds.warm.d2h;
  // Lanes matter only when copies overlap: a full search measures concurrent callers; the
  // instant one leaves the engine's rule.
  // So do the GPUs that share this one's cores: their copy threads share the cores or split them.
  if (o.search != "instant" && !result.interrupted) {
    result.config.lanes = measure_lanes(bench, result.config, &notes);
    const auto others = open_gpus_on_same_cores(*session, topology, &notes);
    std::vector<CudaSession*> others_raw;
    for (const auto& g : others) others_raw.push_back(g.get());
    if (!others_raw.empty())
      result.config.gpu_cores = measure_gpu_cores(bench, result.config, others_raw, &notes);
  }
  result.config.host_copy_threshold = pick_host_copy_threshold(result.config, local_cpus, &notes);
  result.config.host_fill_threshold = pick_host_fill_threshold(result.config, local_cpus, &notes);
  const double search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // 3. What it gives: CUDA's path, cmt's built-in defaults, the tuned knobs, pinned memory.
  TuneRecord record;
  record.search = o.search;
  record.date = utc_now();
  record.seconds = static_cast<double>(static_cast<long long>(search_seconds * 10)) / 10;
  record.gpu = session->name() + " (" + session->pci_bus_id() + ")";
  record.mix = describe_mix(mix);
  record.mix_gbps = static_cast<double>(static_cast<long long>(result.score_gbps * 10)) / 10;
  record.interrupted = result.interrupted;
  record.notes = notes;
  std::printf(
      "%s search: %.1f s, %d configurations measured; the mix at %.1f GB/s with:\n"
      "  threads %u, chunk_bytes %s, d2h_chunk_bytes %s, slots %u, h2d_method %s, d2h_method %s, "
      "threshold %s, d2h_threshold %s, warm_threshold %s, d2h_warm_threshold %s, "
      "lanes %u, gpu_cores %s, host_copy_threshold %s, host_fill_threshold %s\n",
      o.search.c_str(), search_seconds, std::max(1, result.evaluated), result.score_gbps,
      result.config.threads, format_byte_size(result.config.chunk_bytes).c_str(),
      format_byte_size(result.config.d2h_chunk_bytes).c_str(), result.config.slots,
      copy_method_name(result.config.h2d_method), copy_method_name(result.config.d2h_method),
      format_byte_size(result.config.threshold).c_str(),
      format_byte_size(result.config.d2h_threshold).c_str(),
      format_byte_size(result.config.warm_threshold).c_str(),
      format_byte_size(result.config.d2h_warm_threshold).c_str(), result.config.lanes,
      gpu_cores_name(result.config.gpu_cores),
      format_byte_size(result.config.host_copy_threshold).c_str(),
      format_byte_size(result.config.host_fill_threshold).c_str());
  for (const std::string& n : notes) std::printf("  %s\n", n.c_str());
  std::printf("\n%10s %4s %9s %9s %9s %9s %9s %9s\n", "size", "dir", "CUDA", "builtin", "tuned",
              "pinned", "tuned/CUDA", "tuned/pin");
  const Config builtin;
  for (std::size_t bytes : {std::size_t{4} << 20, std::size_t{64} << 20, std::size_t{1} << 30}) {
    if (bytes > need) continue;
    for (Direction d : {Direction::HostToDevice, Direction::DeviceToHost}) {
      CopyCase c{bytes, d, 1};
      MeasuredRow row{bytes,
                      d,
                      bench.cuda_pageable(c, 5).median,
                      bench.cmt(builtin, c, 5).median,
                      bench.cmt(result.config, c, 5).median,
                      bench.cuda_pinned(c, 5).median};
      record.rows.push_back(row);
      std::printf("%10s %4s %9.1f %9.1f %9.1f %9.1f %9.2fx %9.2f\n",
                  format_byte_size(bytes).c_str(), d == Direction::HostToDevice ? "H2D" : "D2H",
                  row.cuda_gbps, row.builtin_gbps, row.tuned_gbps, row.pinned_gbps,
                  row.tuned_gbps / std::max(1e-9, row.cuda_gbps),
                  row.tuned_gbps / std::max(1e-9, row.pinned_gbps));
    }
  }
  if (!bench.bytes_ok()) {
    std::fprintf(stderr, "%sWRONG BYTES in a copy through the engine; no profile written\n", me);
    return 1;
  }

  // 4. The profile.
  std::string path = o.output.empty() ? user_profile_path(machine) : o.output;
  std::string existing;
  std::string unreadable;  // none yet, or not a profile: this GPU's table starts a new one
  if (o.per_gpu && !path.empty()) (void)read_profile_file(path, &existing, &unreadable);
  const std::string text = profile_toml(machine, result.config, record,
                                        o.per_gpu ? session->pci_bus_id() : "", existing);
  if (!o.write) {
    std::printf("\n(--dry-run: no profile written)\n%s", text.c_str());
  } else {
    if (path.empty()) {
      std::fprintf(stderr, "%sneither XDG_CONFIG_HOME nor HOME is set: use --output FILE\n", me);
      return 2;
    }
    Config check;
    ProfileReport report = load_profile_text(text, path, check, &machine);
    std::ofstream out;
    if (report.ok() && make_parents(path)) out.open(path);
    if (!report.ok() || !(out << text) || !(out.flush())) {
      std::fprintf(stderr, "%scannot write the profile to %s%s%s\n", me, path.c_str(),
                   report.ok() ? "" : ": ", report.ok() ? "" : report.errors.front().c_str());
      return 1;
    }
    std::printf("\nprofile written: %s\n", path.c_str());
  }

  // 5. With a command: run it again, without cmt and with the tuned profile, and compare.
  if (!o.command.empty() && o.confirm && o.write) {
    ChildRun plain = run_child(o.command, library, {"CMT_DISABLE=1"});
    ChildRun tuned = run_child(o.command, library, {"CMT_PROFILE=" + path});
    if (plain.status != 0 || tuned.status != 0) {
      std::fprintf(stderr, "%sthe confirming runs failed (status %d without cmt, %d with)\n", me,
                   plain.status, tuned.status);
      return 1;
    }
    std::printf("confirmed: %s took %.2f s without cmt, %.2f s with the tuned profile (%.2fx)\n",
                o.command[0].c_str(), plain.seconds, tuned.seconds,
                plain.seconds / std::max(1e-9, tuned.seconds));
  }
  return 0;
}

}  // namespace cmt::cli
