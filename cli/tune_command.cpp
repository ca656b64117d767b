#include "tune_command.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/output_file.h"
#include "config/fingerprint.h"
#include "config/profile.h"
#include "profile_writer.h"
#include "run_command.h"
#include "tune_plan.h"

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

bool make_parents(const std::string& path) {
  for (std::size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
    std::string dir = path.substr(0, at);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

void print_outcome(const TuneOutcome& t) {
  const TuneRecord& r = t.record;
  std::printf("%s search: %.1f s, %d configurations measured; the mix at %.1f GB/s with:\n  %s\n",
              r.search.c_str(), r.seconds, t.evaluated, r.mix_gbps,
              tuned_knobs_text(t.config).c_str());
  for (const std::string& n : r.notes) std::printf("  %s\n", n.c_str());
  std::printf("\n%10s %4s %9s %9s %9s %9s %9s %9s\n", "size", "dir", "CUDA", "builtin", "tuned",
              "pinned", "tuned/CUDA", "tuned/pin");
  for (const MeasuredRow& row : r.rows)
    std::printf(
        "%10s %4s %9.1f %9.1f %9.1f %9.1f %9.2fx %9.2f\n", format_byte_size(row.bytes).c_str(),
        row.direction == Direction::HostToDevice ? "H2D" : "D2H", row.cuda_gbps, row.builtin_gbps,
        row.tuned_gbps, row.pinned_gbps, row.tuned_gbps / std::max(1e-9, row.cuda_gbps),
        row.tuned_gbps / std::max(1e-9, row.pinned_gbps));
}

// Checks the profile's text and writes it at `path`; false, having said why, if it cannot.
bool write_profile(const std::string& path, const std::string& text,
                   const MachineFingerprint& machine) {
  Config check;
  ProfileReport report = load_profile_text(text, path, check, &machine);
  std::string why = report.ok() ? "" : report.errors.front();
  if (why.empty() && !make_parents(path)) why = std::strerror(errno);
  if (why.empty() && write_output_file(path, text, &why)) return true;
  std::fprintf(stderr, "cmt tune: cannot write the profile to %s: %s\n", path.c_str(), why.c_str());
  return false;
}

}  // namespace

int tune_command(const TuneOptions& o) {
  const char* me = "cmt tune: ";
  TuneRequest request;
  request.search = o.search;
  request.device = o.device;
  request.command = o.command;
  request.trace = o.trace;
  if (!o.trace.empty() && !o.command.empty()) {
    std::fprintf(stderr, "%sgive either --trace FILE or a command (-- CMD), not both\n", me);
    return 2;
  }
  if (!parse_byte_size(o.largest, &request.largest) || request.largest < (4u << 20)) {
    std::fprintf(stderr,
                 "%s--largest '%s' is not valid: expected a size of at least 4M (e.g. 1G)\n", me,
                 o.largest.c_str());
    return 2;
  }
  if (!o.command.empty()) {
    std::string why;
    request.library = find_library(&why);
    if (request.library.empty()) {
      std::fprintf(stderr, "%s%s\n", me, why.c_str());
      return 2;
    }
  }
  const MachineFingerprint machine = read_fingerprint();
  // A CMT_* value the library cannot use stops the tuning before it measures anything (the runs
  // it times would go on with the defaults instead, and every later run with this variable set).
  // A bad profile does not: tuning writes this machine's anew.
  const std::vector<std::string> env_errors = load_configuration("", machine).env_errors;
  if (!env_errors.empty()) {
    for (const std::string& e : env_errors) std::fprintf(stderr, "%serror: %s\n", me, e.c_str());
    std::fprintf(stderr, "%snot tuned: unset or fix the variable\n", me);
    return 2;
  }
  signal(SIGINT, on_interrupt);
  const TuneOutcome t = run_tune(request, draw_progress, g_stop, [&](const std::string& line) {
    std::fprintf(stderr, "%s%s\n", me, line.c_str());
  });
  signal(SIGINT, SIG_DFL);
  if (t.status != 0) {
    std::fprintf(stderr, "%s%s\n", me, t.error.c_str());
    return t.status;
  }
  if (t.record.interrupted) std::fprintf(stderr, "%sinterrupted: keeping the best so far\n", me);
  print_outcome(t);
  if (!t.bytes_ok) {
    std::fprintf(stderr, "%sWRONG BYTES in a copy through the engine; no profile written\n", me);
    return 1;
  }

  const std::string path = o.output.empty() ? user_profile_path(machine) : o.output;
  std::string existing;
  std::string unreadable;  // none yet, or not a profile: this GPU's table starts a new one
  if (o.per_gpu && !path.empty()) (void)read_profile_file(path, &existing, &unreadable);
  const std::string text =
      profile_toml(machine, t.config, t.record, o.per_gpu ? t.pci_bus_id : "", existing);
  if (!o.write) {
    std::printf("\n(--dry-run: no profile written)\n%s", text.c_str());
    return 0;
  }
  if (path.empty()) {
    std::fprintf(stderr, "%sneither XDG_CONFIG_HOME nor HOME is set: use --output FILE\n", me);
    return 2;
  }
  if (!write_profile(path, text, machine)) return 1;
  std::printf("\nprofile written: %s\n", path.c_str());
  if (o.command.empty() || !o.confirm) return 0;
  const CommandTimes times = time_command(o.command, request.library, path);
  if (times.status != 0) {
    std::fprintf(stderr, "%s%s\n", me, times.error.c_str());
    return 1;
  }
  std::printf("confirmed: %s took %.2f s without cmt, %.2f s with the tuned profile (%.2fx)\n",
              o.command[0].c_str(), times.without_s, times.with_s,
              times.without_s / std::max(1e-9, times.with_s));
  return 0;
}

}  // namespace cmt::cli
