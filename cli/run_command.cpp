#include "run_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <algorithm>

#include "common/cpu_features.h"
#include "common/output_file.h"
#include "config/options.h"
#include "preload.h"
#include "profile_command.h"
#include "stats_files.h"

namespace cmt::cli {
namespace {

bool is_file(const std::string& path) {
  return access(path.c_str(), R_OK) == 0;
}

// The path without "..", "." or links, as LD_PRELOAD and messages should show it.
std::string canonical(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

std::string executable_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<std::size_t>(n));
  return path.substr(0, path.find_last_of('/'));
}

}  // namespace

namespace {

// libcmt.so loads the rest of cmt from its own folder on the first CUDA call (hooks/engine_link.h):
// without it there, every copy would go to CUDA untouched, which cmt run says now rather than then.
std::string with_engine_beside(const std::string& library, std::string* why) {
  const std::size_t slash = library.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string(".") : library.substr(0, slash);
  if (is_file(dir + "/libcmt-engine.so")) return library;
  *why = "libcmt-engine.so is not beside " + library + " (an incomplete install or build)";
  return {};
}

}  // namespace

std::string find_library(std::string* why) {
  Config env;
  std::vector<std::string> ignored;
  apply_environment(env, ignored, nullptr, EnvRows::EnvOnly);
  if (!env.library.empty()) {
    if (is_file(env.library)) return with_engine_beside(env.library, why);
    *why = "CMT_LIBRARY='" + env.library + "' is not a readable file";
    return {};
  }
  const std::string dir = executable_dir();
  // Beside cmt in a build tree; installed, in the package's library directory.
  for (const char* rel : {"/libcmt.so", "/" CMT_BIN_TO_PKGLIB "/libcmt.so"})
    if (is_file(dir + rel)) return with_engine_beside(canonical(dir + rel), why);
  *why = "libcmt.so not found beside " + dir + " or in " + dir +
         "/" CMT_BIN_TO_PKGLIB "; set CMT_LIBRARY to its path";
  return {};
}

int run_tool(const std::string& name, const std::vector<std::string>& args) {
  const std::string dir = executable_dir();
  std::string path;
  for (const char* rel : {"/", "/" CMT_BIN_TO_PKGLIB "/"})
    if (access((dir + rel + name).c_str(), X_OK) == 0) {
      path = dir + rel + name;
      break;
    }
  if (path.empty()) {
    std::fprintf(stderr, "cmt: %s not found beside %s or in %s/%s\n", name.c_str(), dir.c_str(),
                 dir.c_str(), CMT_BIN_TO_PKGLIB);
    return 127;
  }
  std::vector<std::string> all = {path};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(path.c_str(), argv.data());
  std::fprintf(stderr, "cmt: cannot run %s: %s\n", path.c_str(), std::strerror(errno));
  return 126;
}

namespace {

// The library `name` in libcmt.so's folder, as a canonical path; empty if it is not there.
std::string beside(const std::string& library, const char* name) {
  const std::size_t slash = library.find_last_of('/');
  const std::string path =
      (slash == std::string::npos ? std::string(".") : library.substr(0, slash)) + "/" + name;
  return is_file(path) ? canonical(path) : std::string();
}

}  // namespace

// libcmt-host.so beside libcmt.so, or its AVX2 build (libcmt-host-avx2.so) where this processor
// has AVX2 and it is there.
std::string host_library_beside(const std::string& library) {
  const std::string avx2 = cpu_runs_avx2() ? beside(library, "libcmt-host-avx2.so") : "";
  return avx2.empty() ? beside(library, "libcmt-host.so") : avx2;
}

// libcmt-release.so beside libcmt.so, or empty.
std::string release_library_beside(const std::string& library) {
  return beside(library, "libcmt-release.so");
}

namespace {

// Runs `argv` as a child and waits, as system() does (this process ignores the terminal's
// interrupt and quit meanwhile: the child decides); its exit status, or -signal.
int run_child(std::vector<char*>& argv) {
  struct sigaction ignore {}, old_int {}, old_quit {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  const pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    execvp(argv[0], argv.data());
    const int err = errno;
    std::fprintf(stderr, "cmt run: cannot run '%s': %s\n", argv[0], std::strerror(err));
    _exit(err == ENOENT ? 127 : 126);
  }
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  if (pid < 0) {
    std::fprintf(stderr, "cmt run: cannot start a process: %s\n", std::strerror(errno));
    return 126;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// Each process's traces (CMT_RECORD with %p, `pattern`), one section after another, into `path`.
void gather_traces(const std::string& pattern, const std::string& path) {
  std::string all;
  std::size_t processes = 0;
  for (const std::string& file : stats_files(pattern)) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().empty()) continue;
    all += text.str();
    ++processes;
  }
  std::string why;
  if (!write_output_file(path, all, &why, 0644))
    std::fprintf(stderr, "cmt run: cannot write the trace to '%s': %s\n", path.c_str(),
                 why.c_str());
  else
    std::fprintf(stderr, "cmt run: the copies of %zu process(es) recorded in %s (cmt trace show %s)\n",
                 processes, path.c_str(), path.c_str());
}

// `cmt run -v` and `cmt run --record FILE`: the command as a child, each of its processes writing
// its own statistics and trace (a private directory, CMT_STATS and CMT_RECORD with %p); then
// their sum said, their traces gathered in FILE, and this process ends as the command did (the
// same status, or the same signal).
int run_observed(std::vector<char*>& argv, bool totals, const std::string& record) {
  int result = 0;
  {
    const PrivateTempDir scratch;
    const char* own = std::getenv("CMT_STATS");
    const bool theirs = own && std::strstr(own, "%p");
    const std::string pattern = theirs ? own : scratch.path() + "/stats.%p.json";
    const std::string traces = scratch.path() + "/trace.%p.tsv";
    if (scratch.path().empty() && (!theirs || !record.empty()))
      std::fprintf(stderr, "cmt run: no private directory: no totals and no trace\n");
    else {
      if (totals) setenv("CMT_STATS", pattern.c_str(), 1);
      if (!record.empty()) setenv("CMT_RECORD", traces.c_str(), 1);
    }
    result = run_child(argv);
    if (totals) {
      StatsSum sum;
      std::string error;
      for (const std::string& file : stats_files(pattern))
        if (!add_stats_file(file, &sum, &error))
          std::fprintf(stderr, "cmt run: %s\n", error.c_str());
      std::fprintf(stderr, "cmt run: the command's %s\n", describe_sum(sum).c_str());
    }
    if (!record.empty() && !scratch.path().empty()) gather_traces(traces, record);
  }
  if (result >= 0) return result;
  signal(-result, SIG_DFL);
  raise(-result);
  return 128 - result;
}

// Bad input stops cmt run before the command starts, where the library would warn once and go on
// with its defaults, perhaps well into a long job: a CMT_* value it cannot use, or a profile it
// would skip (CMT_PROFILE's, this machine's tuned one, a shared one). False after saying so.
bool configuration_usable(const LoadedConfiguration& loaded) {
  if (loaded.profile.ok() && loaded.env_errors.empty()) return true;
  for (const std::string& e : loaded.profile.errors)
    std::fprintf(stderr, "cmt run: error: %s\n", e.c_str());
  for (const std::string& e : loaded.env_errors)
    std::fprintf(stderr, "cmt run: error: %s\n", e.c_str());
  std::fprintf(stderr,
               "cmt run: not run: inside the command the library would warn and go on without "
               "these; `cmt profile show` says what applies\n");
  return false;
}

}  // namespace

int run_command(const std::vector<std::string>& command, bool verbose, const std::string& record) {
  if (command.empty()) {
    std::fprintf(stderr, "cmt run: no command given; usage: cmt run [-v] -- CMD [ARGS...]\n");
    return 2;
  }
  std::string why;
  const std::string library = find_library(&why);
  if (library.empty()) {
    std::fprintf(stderr, "cmt run: %s\n", why.c_str());
    return 2;
  }
  // libcmt-host.so (the memcpy and memset hooks) only where host copies or fills are on:
  // elsewhere not even their size test is paid.
  LoadedConfiguration loaded = load_configuration("", read_fingerprint());
  if (!configuration_usable(loaded)) return 2;
  std::vector<std::string> libraries = {library};
  if ((loaded.config.host_copy != HostCopy::Off || loaded.config.host_fill != HostFill::Off) &&
      !loaded.config.disable) {
    const std::string host = host_library_beside(library);
    if (!host.empty())
      libraries.push_back(host);
    else
      std::fprintf(stderr, "cmt run: libcmt-host.so is not beside %s: no host copies\n",
                   library.c_str());
  }
  // libcmt-release.so (the hooks that drop registrations before pages change) only where hot
  // buffers are registered: its free() hook is paid by every free.
  if (loaded.config.register_mode != Register::Off && !loaded.config.disable) {
    const std::string release = release_library_beside(library);
    if (!release.empty())
      libraries.push_back(release);
    else
      std::fprintf(stderr, "cmt run: libcmt-release.so is not beside %s: no hot buffers\n",
                   library.c_str());
  }
  const std::string preload = preload_value(libraries, std::getenv("LD_PRELOAD"));
  setenv("LD_PRELOAD", preload.c_str(), 1);
  if (verbose) {
    if (!loaded.machine_profile.empty())
      std::fprintf(stderr, "cmt run: this machine's profile: %s\n", loaded.machine_profile.c_str());
    if (!loaded.shared_profile.empty())
      std::fprintf(stderr, "cmt run: shared profile (%s): %s\n", loaded.shared_match.c_str(),
                   loaded.shared_profile.c_str());
    std::fprintf(stderr, "cmt run: LD_PRELOAD=%s\ncmt run: effective configuration:\n%s",
                 preload.c_str(), describe(loaded.config).c_str());
    if (!std::getenv("CMT_LOG")) setenv("CMT_LOG", "info", 1);
  }
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  if (verbose || !record.empty()) return run_observed(argv, verbose, record);
  execvp(argv[0], argv.data());
  int err = errno;
  std::fprintf(stderr, "cmt run: cannot run '%s': %s\n", argv[0], std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

}  // namespace cmt::cli
