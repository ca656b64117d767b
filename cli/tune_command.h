// `cmt tune [--search instant|full|grid] [-- CMD ARGS...]`: measures this machine, picks cmt's
// knobs and writes the profile that libcmt.so then loads for this machine. With a command, it
// first runs CMD under cmt to see its copies (sizes and directions) and tunes for that mix, then
// runs CMD again with and without the new profile and reports the wall-time ratio.
#pragma once

#include <string>
#include <vector>

namespace cmt::cli {

struct TuneOptions {
  std::string search = "instant";  // instant | full | grid
  int device = 0;
  std::string output;          // the profile to write; "" = this user's profile for this machine
  std::string largest = "1G";  // the largest copy measured
  bool write = true;           // --dry-run: measure and report only
  bool confirm = true;         // with a command: run it again to compare
  bool per_gpu = false;        // write the lane knobs for this GPU only ([gpu."BUS"])
  std::vector<std::string> command;
  std::string trace;  // tune for a recorded trace's copies instead (cmt run --record)
};

int tune_command(const TuneOptions& options);

}  // namespace cmt::cli
