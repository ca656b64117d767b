#include "profile_command.h"

#include <cstdio>

#include "profile.h"

namespace cmt::cli {
namespace {

void print_problems(const std::vector<std::string>& warnings,
                    const std::vector<std::string>& errors, const char* prefix) {
  for (const std::string& w : warnings) std::fprintf(stderr, "%swarning: %s\n", prefix, w.c_str());
  for (const std::string& e : errors) std::fprintf(stderr, "%serror: %s\n", prefix, e.c_str());
}

}  // namespace

int validate_profile(const std::string& path, bool quiet, const char* prefix) {
  Config config;
  ProfileReport report = load_profile_file(path, config);
  print_problems(report.warnings, report.errors, prefix);
  if (!report.ok()) return 1;
  if (!quiet)
    std::printf("%s: valid (schema %d)\n%s", path.c_str(), kProfileSchema,
                describe(config).c_str());
  return 0;
}

int show_configuration(const std::string& profile) {
  LoadedConfiguration loaded = load_configuration(profile);
  print_problems(loaded.profile.warnings, loaded.profile.errors, "");
  print_problems({}, loaded.env_errors, "");
  std::printf("%s", describe(loaded.config).c_str());
  return loaded.profile.ok() && loaded.env_errors.empty() ? 0 : 1;
}

}  // namespace cmt::cli
