// What cmt's benchmark programs share about their own process: where a symbol came from, where
// the program lives, its CPU time, and running under libcmt.so (re-executing with it preloaded
// when it is not).
#pragma once

#include <string>

namespace cmt::bench {

// The file of the loaded object that holds `addr` ("?" if none).
std::string object_of(const void* addr);

// The directory of this program's executable.
std::string self_dir();

// The CPU time this process has used so far, all its threads (cmt's copy threads among them), in
// seconds.
double process_cpu_seconds();

// Returns if cudaMemcpy already resolves to libcmt.so's hook; else re-executes this program with
// the libcmt.so beside it preloaded. Prints why and exits 2 if that cannot be done.
void ensure_preloaded(char** argv);

}  // namespace cmt::bench
