// The descriptors libcmt.so keeps open belong to the program's table: a program that closes every
// descriptor it did not open, then opens files of its own at those numbers, must find its files
// read and closed by no one but itself, and cmt must go on reading its own file.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "common/kept_file.h"
#include "interposer/page_map.h"

namespace cmt {
namespace {

// A file of `text` in the temporary directory, removed with the object.
struct TextFile {
  explicit TextFile(const std::string& text) {
    char name[] = "/tmp/cmt-kept-XXXXXX";
    const int fd = mkstemp(name);
    path = name;
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
  }
  ~TextFile() { unlink(path.c_str()); }
  std::string path;
};

std::string read_kept(KeptFile& kept) {
  char text[64] = {};
  const ssize_t n = kept.pread_at(text, sizeof(text) - 1, 0);
  return n < 0 ? "(failed)" : std::string(text, static_cast<std::size_t>(n));
}

bool is_open(int fd) {
  return fcntl(fd, F_GETFD) != -1;
}

TEST(KeptFile, ReadsItsOwnFileAfterTheProgramTakesItsNumber) {
  TextFile cmts("cmt's file"), programs("the program's file");
  KeptFile kept(cmts.path.c_str());
  EXPECT_EQ(read_kept(kept), "cmt's file");
  const int number = kept.descriptor();
  ASSERT_GE(number, 0);
  // The program closes it behind cmt's back and opens a file of its own at that number.
  close(number);
  const int opened = open(programs.path.c_str(), O_RDONLY);
  ASSERT_GE(opened, 0);
  if (opened != number) {  // the lowest number free is likely cmt's; dup2 makes sure
    ASSERT_EQ(dup2(opened, number), number);
    close(opened);
  }
  EXPECT_EQ(read_kept(kept), "cmt's file");
  EXPECT_NE(kept.descriptor(), number);
  // The program's file is open still, at its offset, with its bytes.
  ASSERT_TRUE(is_open(number));
  EXPECT_EQ(lseek(number, 0, SEEK_CUR), 0);
  char text[32] = {};
  EXPECT_EQ(read(number, text, sizeof(text) - 1), 18);
  EXPECT_STREQ(text, "the program's file");
  // Letting go closes cmt's own descriptor and leaves the program's alone.
  const int own = kept.descriptor();
  kept.reopen();
  EXPECT_FALSE(is_open(own));
  EXPECT_TRUE(is_open(number));
  EXPECT_EQ(kept.descriptor(), -1);
  EXPECT_EQ(read_kept(kept), "cmt's file");  // opened anew
  kept.reopen();
  close(number);
}

TEST(KeptFile, ANumberNoLongerItsOwnIsNeverClosed) {
  TextFile cmts("cmt's file"), programs("the program's file");
  KeptFile kept(cmts.path.c_str());
  EXPECT_EQ(read_kept(kept), "cmt's file");
  const int number = kept.descriptor();
  const int opened = open(programs.path.c_str(), O_RDONLY);
  ASSERT_GE(opened, 0);
  ASSERT_EQ(dup2(opened, number), number);  // dup2 closes cmt's and puts the program's there
  close(opened);
  kept.reopen();
  EXPECT_TRUE(is_open(number));
  close(number);
}

TEST(KeptFile, AFileThatCannotBeOpenedReadsAsAFailure) {
  KeptFile kept("/nonexistent/cmt-kept-file");
  char c = 0;
  errno = 0;
  EXPECT_EQ(kept.pread_at(&c, 1, 0), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(kept.descriptor(), -1);
}

// The page map end to end, in a child (the test closes every descriptor): a program that closes
// all it did not open and opens a file at cmt's number still has its page questions answered,
// and cmt's letting go of the map in a forked child closes nothing of the program's.
TEST(PageMap, SurvivesTheProgramClosingEveryDescriptor) {
  TextFile programs("the program's file");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    static int local = 1;
    page_map_forget_in_child();                // as cmt's fork handler does
    if (!page_entry(&local).known) _exit(10);  // the child's /proc/self/pagemap opened
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    const int opened = open(programs.path.c_str(), O_RDONLY);  // the lowest number: cmt's was
    if (opened < 0) _exit(11);
    const PageEntry entry = page_entry(&local);
    if (!entry.known || !entry.present) _exit(12);
    if (lseek(opened, 0, SEEK_CUR) != 0) _exit(13);
    page_map_forget_in_child();  // as a fork of this child would
    if (!is_open(opened)) _exit(14);
    char text[32] = {};
    if (read(opened, text, sizeof(text) - 1) != 18) _exit(15);
    if (!page_entry(&local).known) _exit(16);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace cmt
