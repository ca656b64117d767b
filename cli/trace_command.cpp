#include "trace_command.h"

#include <cstdio>

#include "trace_file.h"

namespace cmt::cli {

int trace_show(const std::vector<std::string>& files) {
  Trace trace;
  for (const std::string& file : files) {
    std::string error;
    if (!read_trace_file(file, &trace, &error)) {
      std::fprintf(stderr, "cmt trace show: %s\n", error.c_str());
      return 2;
    }
  }
  std::fputs(describe_trace(trace).c_str(), stdout);
  return 0;
}

}  // namespace cmt::cli
