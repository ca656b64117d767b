// Files cmt writes (statistics, profiles, benchmark results): written to a new file of the target's
// own directory, made exclusively and private to the user (mkstemp), then renamed over the target.
// Whatever was at the path (a symlink someone planted, a FIFO, another user's file) is replaced,
// never followed, opened or truncated; nothing blocks; a reader never sees half a file. Every
// failure says why (errno's text), for the message that names the path.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <string>

namespace cmt {

class OutputFile {
 public:
  // Makes the temporary file beside `path`; stream() is nullptr (and why() says why) if it cannot.
  // `mode` is the file's once it is in place.
  explicit OutputFile(std::string path, mode_t mode = 0644);
  ~OutputFile();  // an output not committed is removed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::FILE* stream() const { return stream_; }
  // Writes what is buffered, closes and renames the file over the path. False, with why(), if
  // any write or the rename failed (the temporary file is then removed).
  bool commit();
  const std::string& why() const { return why_; }

 private:
  std::string path_, temporary_, why_;
  std::FILE* stream_ = nullptr;
  mode_t mode_;
};

// `text` as the file at `path`, as OutputFile writes it. False with `*why` set if it cannot.
bool write_output_file(const std::string& path, const std::string& text, std::string* why,
                       mode_t mode = 0644);

// A per-process output's path (CMT_STATS, CMT_RECORD): each `%p` in `pattern` becomes this
// process's pid, so the processes of a tree each write their own file.
std::string path_for_this_process(std::string pattern);

}  // namespace cmt
