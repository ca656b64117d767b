// Reading a cmt profile: a TOML file with a schema version, the machine it was tuned on, and the
// knobs under [cmt] (the option table's names). Loading is all-or-nothing: any error leaves the
// configuration untouched. Every message names the file, line, column and key, and what was
// expected; unknown keys are warnings that suggest the nearest known key. Never throws.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/cpu_quota.h"
#include "config/fingerprint.h"
#include "config/options.h"

namespace cmt {

constexpr int kProfileSchema = 1;

// Profiles are read only from regular files of at most this size: a FIFO would block the host
// program for ever, and /dev/zero would grow its memory without end.
constexpr std::size_t kMaxProfileBytes = 1u << 20;

// What a profile's text must be before the TOML parser sees it, else it is refused:
// - ASCII: toml++ 3.3 (Debian's) runs into undefined behaviour on some non-ASCII characters
//   (U+FB36-U+FEFE, found by fuzzing under UBSan), and a profile needs none;
// - nested at most kMaxProfileNesting deep (arrays and inline tables, table headers counted): the
//   parser recurses once per level, and the library parses on whichever thread makes the first
//   CUDA call, whose stack may be small (arrays 250 deep overflowed a 256 KiB stack; 10 levels
//   already took 16 KiB). A profile needs 2.
// Returns "" for such text, else an error naming `name`, the line and column, and what was found.
constexpr int kMaxProfileNesting = 8;
std::string profile_text_error(std::string_view text, const std::string& name);

// Reads the profile at `path` into `*text`. False, with `*error` saying why ("No such file or
// directory", "is a directory, not a profile", "is a FIFO, not a regular file", "is 3 MiB; a
// profile is at most 1 MiB"), for anything else. Never blocks and never throws.
bool read_profile_file(const std::string& path, std::string* text, std::string* error);

struct ProfileReport {
  std::vector<std::string> errors;    // the profile was not applied
  std::vector<std::string> warnings;  // applied, but something was ignored
  bool ok() const { return errors.empty(); }
};

// Applies the profile at `path` to `config` (recording "profile PATH" as each knob's origin). With
// `here`, a profile whose [machine] names another CPU or GPU model (or count) is an error, and
// one from another driver or PCIe link a warning.
ProfileReport load_profile_file(const std::string& path, Config& config,
                                const MachineFingerprint* here = nullptr);
// The same, from text; `name` stands for the file in messages.
ProfileReport load_profile_text(std::string_view text, const std::string& name, Config& config,
                                const MachineFingerprint* here = nullptr);

// More copy threads than the cores this process may run on only take turns on them and spin
// against each other (threads 256 with spin_us 1 s took a 20-copy program on 2 cores from 0.91 to
// 110.9 s): `config`'s threads, and each GPU's, are capped at `cores`, each cap said in `warnings`
// (naming where the value came from). Under a CPU quota (common/cpu_quota.h) the cap is the CPUs
// it keeps busy, rounded up: a profile tuned on the whole machine (the shared ones say threads =
// 8) would otherwise spend a 2-CPU container's time four times over; a value from the environment
// (CMT_THREADS) is the user's own choice for this process and is kept, with a warning. The
// library applies it to the configuration it loads, with this process's cores and quota;
// `cmt profile validate` and `show` say what it would do.
void cap_threads(Config& config, std::size_t cores, std::vector<std::string>* warnings,
                 const std::optional<CpuQuota>& quota = std::nullopt);

// The configuration libcmt.so runs with, by precedence: each CMT_* variable > the profile named
// by `profile_path` (or, when that is "", by CMT_PROFILE) > this user's tuned profile for `here`,
// if there is one > a shared profile from configs/ that matches this machine (when the user has
// none) > the built-in defaults. The environment-only options (CMT_PROFILE, CMT_CONFIGS_DIR,
// CMT_STATS, ...) come from the environment alone. Every problem found is kept; a bad profile is
// skipped as a whole.
struct LoadedConfiguration {
  Config config;
  std::string machine_profile;  // the user's profile for this machine, if one was found
  std::string shared_profile;   // else the shared profile used, if any
  std::string shared_match;     // how it matched: "exact machine" or "same CPU and GPU models"
  ProfileReport profile;        // problems of the profiles applied
  std::vector<std::string> env_errors;
};
LoadedConfiguration load_configuration(
    const std::string& profile_path, const MachineFingerprint& here,
    const std::function<const char*(const char*)>& getenv_fn = nullptr);

// Shared profiles (configs/ of the source tree, contributed by pull request): `configured`
// (CMT_CONFIGS_DIR) if set, else configs/ or share/cmt/configs/ beside the directory of the
// binary holding this code (libcmt.so or cmt). "" if there is none.
std::string shared_profiles_dir(const std::optional<std::string>& configured);

// The shared profile for `here` in `dir`: KEY.toml for this exact machine first, else the first
// (by name) whose [machine] has this CPU model and these GPU models. Empty path if none.
struct SharedProfile {
  std::string path;
  std::string match;
};
SharedProfile find_shared_profile(const std::string& dir, const MachineFingerprint& here);

// The known name closest to `key` (edit distance), or "" if none is close.
std::string nearest_option(const std::string& key);

}  // namespace cmt
