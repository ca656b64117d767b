// cmt tune's plan, from a request to a profile's knobs: watch the command's copies if there is
// one, search the lane knobs (search.h), confirm them against the built-in defaults, pick the
// knobs a search does not move (pickers.h), and measure what the choice gives. The CLI parses the
// command line into a TuneRequest and prints and writes what comes back; it decides nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "config/options.h"
#include "copy_mix.h"
#include "profile_writer.h"
#include "search.h"

namespace cmt {

struct TuneRequest {
  std::string search = "instant";  // instant | full | grid
  int device = 0;
  std::size_t largest = std::size_t{1} << 30;  // the largest copy measured
  std::vector<std::string> command;            // with one: tune for its copies
  std::string trace;                           // or for the copies of a recorded trace
  std::string library;                         // the libcmt.so to preload into `command`
};

struct TuneOutcome {
  int status = 0;     // 0, or the exit status for the CLI (1: failed, 2: bad request, 127)
  std::string error;  // why, when status is not 0
  Config config;      // every tuned knob set
  TuneRecord record;  // what was measured, for the profile and the report
  int evaluated = 0;  // configurations the search measured
  std::string pci_bus_id;
  bool bytes_ok = true;  // every copy through the engine gave the right bytes
};

// Runs the plan on GPU `request.device`. `progress` is drawn as the search goes; once `stop` is
// set (Ctrl-C) the search keeps the best so far. Messages on the way ("watching ...") go to
// `say`.
TuneOutcome run_tune(const TuneRequest& request, const ProgressFn& progress,
                     const std::atomic<bool>& stop,
                     const std::function<void(const std::string&)>& say);

// With a command: runs it again without cmt and with the profile at `profile`, and says how long
// each took. Non-zero status if either run failed.
struct CommandTimes {
  int status = 0;
  std::string error;
  double without_s = 0, with_s = 0;
};
CommandTimes time_command(const std::vector<std::string>& command, const std::string& library,
                          const std::string& profile);

}  // namespace cmt
