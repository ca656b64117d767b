// The files cmt writes (common/output_file.h): whatever is at the path (a symlink someone planted,
// a FIFO) is replaced, never followed or opened, and failures say why (issue 31, finding 7: `cmt
// profile export -o` wrote through another user's symlink and blocked on a FIFO).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/output_file.h"
#include "temp_files.h"

namespace cmt {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int entries(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

TEST(OutputFile, ReplacesASymlinkOrFifoWithoutFollowingOrBlocking) {
  const std::string dir = temp_dir();
  write_file(dir + "/victim", "precious\n");
  ASSERT_EQ(symlink((dir + "/victim").c_str(), (dir + "/out.json").c_str()), 0);
  std::string why;
  ASSERT_TRUE(write_output_file(dir + "/out.json", "{}\n", &why)) << why;
  EXPECT_EQ(read_all(dir + "/victim"), "precious\n");  // the link's target is untouched
  struct stat st {};
  ASSERT_EQ(lstat((dir + "/out.json").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(read_all(dir + "/out.json"), "{}\n");
  // A FIFO: replaced at once (opening it to write would wait for a reader for ever).
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  ASSERT_TRUE(write_output_file(dir + "/fifo", "x", &why, 0600)) << why;
  ASSERT_EQ(lstat((dir + "/fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(entries(dir), 3);  // victim, out.json, fifo: no temporary file left behind
  remove_tree(dir);
}

TEST(OutputFile, SaysWhyAndLeavesNothingWhenItCannot) {
  const std::string dir = temp_dir();
  std::string why;
  EXPECT_FALSE(write_output_file(dir + "/missing/out.json", "{}", &why));
  EXPECT_EQ(why, "No such file or directory");
  {
    OutputFile abandoned(dir + "/half.json");
    ASSERT_NE(abandoned.stream(), nullptr);
    std::fputs("{\"half", abandoned.stream());
  }  // never committed: gone, and no half file at the path
  EXPECT_EQ(entries(dir), 0);
  remove_tree(dir);
}

}  // namespace
}  // namespace cmt
