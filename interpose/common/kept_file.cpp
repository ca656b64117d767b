#include "common/kept_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace cmt {

bool KeptFile::names_the_file(int fd) const noexcept {
  struct stat st {};
  return fd >= 0 && fstat(fd, &st) == 0 &&
         static_cast<std::uint64_t>(st.st_dev) == device_.load(std::memory_order_acquire) &&
         static_cast<std::uint64_t>(st.st_ino) == inode_.load(std::memory_order_acquire);
}

int KeptFile::usable_descriptor() noexcept {
  int held = fd_.load(std::memory_order_acquire);
  if (held >= 0 && names_the_file(held)) return held;
  // None yet, or the program closed it (and may have reused the number): a new one. The old
  // number is not closed, as it is not known to be cmt's.
  const int opened = open(path_, O_RDONLY | O_CLOEXEC);
  if (opened < 0) return -1;
  struct stat st {};
  if (fstat(opened, &st) != 0) {
    close(opened);
    return -1;
  }
  // Every open of the path gives the same identity, so racing threads store the same values.
  device_.store(static_cast<std::uint64_t>(st.st_dev), std::memory_order_release);
  inode_.store(static_cast<std::uint64_t>(st.st_ino), std::memory_order_release);
  if (fd_.compare_exchange_strong(held, opened, std::memory_order_acq_rel)) return opened;
  // Another thread replaced it first: use theirs, close ours (ours alone holds this number).
  close(opened);
  return names_the_file(held) ? held : -1;
}

ssize_t KeptFile::pread_at(void* buffer, std::size_t bytes, off_t offset) noexcept {
  const int saved = errno;
  const int fd = usable_descriptor();
  if (fd < 0) return -1;
  errno = saved;
  return pread(fd, buffer, bytes, offset);
}

void KeptFile::reopen() noexcept {
  const int saved = errno;
  const int fd = fd_.exchange(-1, std::memory_order_acq_rel);
  if (names_the_file(fd)) close(fd);
  errno = saved;
}

int KeptFile::descriptor() const noexcept {
  return fd_.load(std::memory_order_acquire);
}

}  // namespace cmt
