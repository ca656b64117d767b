// `cmt run -- CMD ARGS...`: runs CMD with libcmt.so preloaded. CMD replaces cmt (exec), so its
// exit status and any signal that ends it reach the caller unchanged.
#pragma once

#include <string>
#include <vector>

namespace cmt::cli {

// Where libcmt.so is: $CMT_LIBRARY, else beside the cmt executable, else ../lib[/cmt]. Empty, with
// `*why` saying what was looked for, if there is none (or CMT_LIBRARY names no readable file).
std::string find_library(std::string* why);

// libcmt-host.so (the memcpy hooks of the host leg) beside `library`, or "" if there is none.
std::string host_library_beside(const std::string& library);

// Execs one of cmt's own programs (found like libcmt.so) with `args`; returns only on failure.
int run_tool(const std::string& name, const std::vector<std::string>& args);

// Execs `command`; returns only on failure, with the exit code to use (126/127) after printing
// why. With `verbose` or a `record` path, runs it as a child instead and ends as it did: with
// `verbose` the totals of its processes are said, with `record` their copies are written there
// (interposer/recorder.h).
int run_command(const std::vector<std::string>& command, bool verbose,
                const std::string& record = "");

}  // namespace cmt::cli
