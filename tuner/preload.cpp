#include "preload.h"

#include <dirent.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

extern char** environ;

namespace cmt {

std::string preload_value(const std::vector<std::string>& libraries, const char* existing) {
  std::string out;
  for (const std::string& l : libraries) out += (out.empty() ? "" : ":") + l;
  if (!existing) return out;
  // LD_PRELOAD entries are separated by spaces or colons.
  std::string item;
  std::stringstream ss(existing);
  while (std::getline(ss, item, ':')) {
    std::stringstream words(item);
    std::string word;
    while (words >> word)
      if (std::find(libraries.begin(), libraries.end(), word) == libraries.end()) out += ":" + word;
  }
  return out;
}

ChildRun run_preloaded(const std::vector<std::string>& command, const std::string& library,
                       const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.push_back(*e);
  env.push_back("LD_PRELOAD=" + preload_value({library}, std::getenv("LD_PRELOAD")));
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

PrivateTempDir::PrivateTempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cmt-tune-XXXXXX";
  if (mkdtemp(pattern.data())) path_ = pattern;
}

PrivateTempDir::~PrivateTempDir() {
  if (path_.empty()) return;
  if (DIR* d = opendir(path_.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
  }
  rmdir(path_.c_str());
}

}  // namespace cmt
