#include "profile_command.h"

#include <cstdio>

#include "common/cpu_quota.h"
#include "common/host_files.h"
#include "common/output_file.h"
#include "config/profile.h"

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
  const MachineFingerprint here = read_fingerprint();
  ProfileReport report = load_profile_file(path, config, &here);
  // What loading does past this process's cores, said where the profile is checked.
  if (report.ok())
    cap_threads(config, allowed_cpus().size(), &report.warnings, process_cpu_quota());
  print_problems(report.warnings, report.errors, prefix);
  if (!report.ok()) return 1;
  if (!quiet)
    std::printf("%s: valid (schema %d)\n%s", path.c_str(), kProfileSchema,
                describe(config).c_str());
  return 0;
}

int show_configuration(const std::string& profile) {
  LoadedConfiguration loaded = load_configuration(profile, read_fingerprint());
  const std::string shared_dir = shared_profiles_dir(loaded.config.configs_dir);
  std::printf("# shared profiles: %s\n", shared_dir.empty() ? "none" : shared_dir.c_str());
  if (!loaded.machine_profile.empty())
    std::printf("# this machine's profile: %s\n", loaded.machine_profile.c_str());
  if (!loaded.shared_profile.empty())
    std::printf("# shared profile (%s): %s\n", loaded.shared_match.c_str(),
                loaded.shared_profile.c_str());
  print_problems(loaded.profile.warnings, loaded.profile.errors, "");
  print_problems({}, loaded.env_errors, "");
  std::vector<std::string> capped;  // what the library will do with these values here
  Config as_run = loaded.config;
  cap_threads(as_run, allowed_cpus().size(), &capped, process_cpu_quota());
  if (const auto& quota = process_cpu_quota()) {
    const std::size_t usable = usable_cpus(allowed_cpus().size());
    std::printf("# CPU quota: %s; copy threads (threads = 0) are sized for %zu CPU%s\n",
                describe(*quota).c_str(), usable, usable == 1 ? "" : "s");
  }
  print_problems(capped, {}, "");
  std::printf("%s", describe(loaded.config).c_str());
  return loaded.profile.ok() && loaded.env_errors.empty() ? 0 : 1;
}

int show_options(bool markdown) {
  if (markdown) {
    std::printf("| variable | profile key | where | default | meaning |\n");
    std::printf("| --- | --- | --- | --- | --- |\n");
  }
  for (const OptionSpec& row : option_table()) {
    const std::string key = row.profile_may_set() ? row.name : "";
    const std::string def = row.default_text();
    if (markdown) {
      std::printf("| `%s` | %s | %s | %s | %s |\n", row.env,
                  key.empty() ? "" : ("`" + key + "`").c_str(), scope_text(row).c_str(),
                  def.empty() ? "" : ("`" + def + "`").c_str(), row.help.c_str());
      continue;
    }
    std::printf("%s%s  [%s]  default: %s\n", row.env, key.empty() ? "" : (" (" + key + ")").c_str(),
                scope_text(row).c_str(), def.empty() ? "(none)" : def.c_str());
    // The help, wrapped at 96 columns under a 4-space indent.
    std::string line;
    std::string word;
    auto flush = [&] {
      std::printf("    %s\n", line.c_str());
      line.clear();
    };
    for (const char* p = row.help.c_str();; ++p) {
      if (*p == ' ' || *p == '\0') {
        if (!line.empty() && line.size() + 1 + word.size() > 92) flush();
        line += (line.empty() ? "" : " ") + word;
        word.clear();
        if (*p == '\0') break;
      } else {
        word += *p;
      }
    }
    if (!line.empty()) flush();
  }
  if (!markdown)
    std::printf(
        "\nA profile (TOML) sets options under [cmt] by their keys, and per-GPU ones under "
        "[gpu.\"BUS\"]; CMT_* variables override it.\n");
  return 0;
}

int export_profile(const std::string& output) {
  const MachineFingerprint here = read_fingerprint();
  const std::string path = user_profile_path(here);
  std::string text, why;
  if (path.empty() || !read_profile_file(path, &text, &why)) {
    std::fprintf(stderr,
                 "cmt profile export: no tuned profile for this machine%s%s%s%s; run `cmt tune` "
                 "first\n",
                 path.empty() ? "" : " at ", path.c_str(), why.empty() ? "" : ": ", why.c_str());
    return 1;
  }
  Config config;
  ProfileReport report = load_profile_text(text, path, config, &here);
  print_problems(report.warnings, report.errors, "cmt profile export: ");
  if (!report.ok()) return 1;
  if (text.find("[machine]") == std::string::npos) {
    std::fprintf(stderr, "cmt profile export: %s has no [machine] table; re-run `cmt tune`\n",
                 path.c_str());
    return 1;
  }
  if (output.empty() || output == "-") {
    std::fputs(text.c_str(), stdout);
  } else if (std::string why; !write_output_file(output, text, &why)) {
    std::fprintf(stderr, "cmt profile export: cannot write %s: %s\n", output.c_str(), why.c_str());
    return 1;
  }
  std::fprintf(stderr,
               "# to share it: save it as configs/%s.toml in cmt's repository and open a pull "
               "request (configs/README.md)\n",
               here.key().c_str());
  return 0;
}

int show_machine_profile_path() {
  const MachineFingerprint here = read_fingerprint();
  const std::string path = user_profile_path(here);
  if (path.empty()) {
    std::fprintf(stderr, "cmt profile path: neither XDG_CONFIG_HOME nor HOME is set\n");
    return 1;
  }
  std::printf("%s\n", path.c_str());
  std::fprintf(stderr, "# machine: %s, %d CPUs, GPUs:", here.cpu_model.c_str(), here.cpus);
  for (const std::string& g : here.gpus) std::fprintf(stderr, " %s", g.c_str());
  std::fprintf(stderr, "%s%s%s\n", here.gpus.empty() ? " none" : "",
               here.pcie.empty() ? "" : (", link " + here.pcie).c_str(),
               here.driver.empty() ? "" : (", driver " + here.driver).c_str());
  return 0;
}

}  // namespace cmt::cli
