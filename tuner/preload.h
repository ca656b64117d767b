// Running a program with libcmt.so preloaded, as `cmt run` does and `cmt tune` does to watch a
// command's copies and to time it with and without a profile.
#pragma once

#include <string>
#include <vector>

namespace cmt {

// LD_PRELOAD for a child: cmt's libraries first (libcmt.so, then libcmt-host.so where host copies
// are on), any value already set kept after them (once each).
std::string preload_value(const std::vector<std::string>& libraries, const char* existing);

struct ChildRun {
  int status = -1;  // exit status, or 128 + signal; -1 if it could not be started
  double seconds = 0;
};

// Runs `command` with `library` preloaded and `extra` ("NAME=value") added to this process's
// environment, and waits for it.
ChildRun run_preloaded(const std::vector<std::string>& command, const std::string& library,
                       const std::vector<std::string>& extra);

// A directory of this user's alone (mkdtemp: mode 0700, a fresh name) for a child's output,
// removed with what is in it when this goes.
class PrivateTempDir {
 public:
  PrivateTempDir();
  ~PrivateTempDir();
  PrivateTempDir(const PrivateTempDir&) = delete;
  PrivateTempDir& operator=(const PrivateTempDir&) = delete;
  // "" if no directory could be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace cmt
