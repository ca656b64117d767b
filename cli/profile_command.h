// `cmt profile validate FILE`, `show`, `options`, `export` and `path`: check a profile, print the
// configuration the library would use (with where each value comes from) and the options it has.
#pragma once

#include <string>
#include <vector>

#include "config/profile.h"

namespace cmt::cli {

// Prints every problem in FILE (each line prefixed with `prefix`) and, unless `quiet`, the
// configuration it gives; returns 0 if it would be applied, 1 if not.
int validate_profile(const std::string& path, bool quiet = false, const char* prefix = "");

// Prints the effective configuration; returns 1 if the profile or an environment value is bad.
int show_configuration(const std::string& profile);

// Writes this user's tuned profile for this machine, checked, to `output` ("" or "-": stdout), for
// contributing to configs/; returns 1 if there is none or it is not valid.
int export_profile(const std::string& output);

// Prints the option table: every CMT_* variable with its profile key, where it applies, its
// default and its help; as plain text, or (`markdown`) as the README's table.
int show_options(bool markdown);

// Prints where this user's tuned profile for this machine lives (and, on stderr, the machine).
int show_machine_profile_path();

}  // namespace cmt::cli
