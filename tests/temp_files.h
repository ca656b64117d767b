// Files the CPU tests write: a fresh directory under /tmp, and a file (its folders made) with
// the given text, to stand in for a machine's /proc and /sys or a user's profiles.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cmt {

inline std::string temp_dir() {
  char dir[] = "/tmp/cmt_testXXXXXX";
  const char* made = mkdtemp(dir);
  return made ? made : "";
}

inline void write_file(const std::string& path, const std::string& text) {
  std::string dir = path.substr(0, path.find_last_of('/'));
  std::string cmd = "mkdir -p '" + dir + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

inline void remove_tree(const std::string& dir) {
  if (!dir.empty()) (void)std::system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace cmt
