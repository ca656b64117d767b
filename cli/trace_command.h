// `cmt trace show FILE...`: the summary of traces `cmt run --record` wrote (tuner/trace_file.h).
#pragma once

#include <string>
#include <vector>

namespace cmt::cli {

// Prints the summary of the traces in `files` read together; 2 with the reason if one is
// unreadable or malformed.
int trace_show(const std::vector<std::string>& files);

}  // namespace cmt::cli
