// A file cmt keeps open for the life of the process (/proc/self/pagemap, /proc/loadavg), read with
// pread, in a descriptor table that is the program's.
//
// Why: a program may close every descriptor it did not open itself (closefrom, close_range, a
// daemon's loop over the table, dup2 onto a number), and then open files of its own that take
// cmt's numbers. A number kept blindly would then read the program's file, and closing it (a
// forked child lets go of its parent's pagemap) would close the program's file. So every read
// first checks that the number still names the file cmt opened (its device and inode), opening it
// anew if not, and a number that is no longer cmt's is never closed: it is forgotten.
//
// Lock-free and allocation-free (open, fstat, pread and close only), so it may be read inside
// malloc and in signal handlers.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace cmt {

class KeptFile {
 public:
  // `path` must outlive the object (a string literal, or a string the owner keeps). Constant-
  // initialized at namespace scope, and never closed but by reopen(): nothing to run at start-up
  // or exit, and usable by a hook that runs before either.
  constexpr explicit KeptFile(const char* path) : path_(path) {}
  KeptFile(const KeptFile&) = delete;
  KeptFile& operator=(const KeptFile&) = delete;

  // pread of the file, through a descriptor that names it: -1 (errno set) where it cannot be
  // opened. Keeps errno otherwise as pread leaves it.
  ssize_t pread_at(void* buffer, std::size_t bytes, off_t offset) noexcept;

  // Forgets the descriptor, closing it only if it still names the file, and opens the file
  // anew at the next read. For a forked child, where /proc/self/pagemap opened by the parent
  // answers for the parent's pages.
  void reopen() noexcept;

  // The descriptor now held (-1: none), for tests.
  int descriptor() const noexcept;

 private:
  // A descriptor that names the file: the one held if it still does, else a new one.
  int usable_descriptor() noexcept;
  bool names_the_file(int fd) const noexcept;

  const char* const path_;
  std::atomic<int> fd_{-1};
  // The file's identity, set when a descriptor is first opened (the same for every open of one
  // path in one process).
  std::atomic<std::uint64_t> device_{0}, inode_{0};
};

}  // namespace cmt
