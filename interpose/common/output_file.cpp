#include "common/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace cmt {

OutputFile::OutputFile(std::string path, mode_t mode) : path_(std::move(path)), mode_(mode) {
  temporary_ = path_ + ".XXXXXX";
  const int fd = mkstemp(temporary_.data());
  if (fd < 0) {
    why_ = std::strerror(errno);
    temporary_.clear();
    return;
  }
  stream_ = fdopen(fd, "w");
  if (!stream_) {
    why_ = std::strerror(errno);
    close(fd);
    unlink(temporary_.c_str());
    temporary_.clear();
  }
}

OutputFile::~OutputFile() {
  if (stream_) std::fclose(stream_);
  if (!temporary_.empty()) unlink(temporary_.c_str());
}

bool OutputFile::commit() {
  if (!stream_) return false;
  bool ok = std::fflush(stream_) == 0 && !std::ferror(stream_);
  if (!ok) why_ = std::strerror(errno);
  if (ok && fchmod(fileno(stream_), mode_) != 0) {
    ok = false;
    why_ = std::strerror(errno);
  }
  if (std::fclose(stream_) != 0 && ok) {
    ok = false;
    why_ = std::strerror(errno);
  }
  stream_ = nullptr;
  if (ok && rename(temporary_.c_str(), path_.c_str()) != 0) {
    ok = false;
    why_ = std::strerror(errno);
  }
  if (ok) temporary_.clear();  // in place: nothing to remove
  return ok;
}

bool write_output_file(const std::string& path, const std::string& text, std::string* why,
                       mode_t mode) {
  OutputFile out(path, mode);
  if (out.stream() && std::fwrite(text.data(), 1, text.size(), out.stream()) == text.size() &&
      out.commit())
    return true;
  *why = out.why().empty() ? std::string("could not be written") : out.why();
  return false;
}

std::string path_for_this_process(std::string pattern) {
  const std::string pid = std::to_string(getpid());
  for (std::size_t at = 0; (at = pattern.find("%p", at)) != std::string::npos; at += pid.size())
    pattern.replace(at, 2, pid);
  return pattern;
}

}  // namespace cmt
