// Writes a tuned profile: TOML with the schema version, the cmt version, the machine it was tuned
// on (its fingerprint), the knobs the tuner chose, and what it measured (CUDA's own path, cmt's
// built-in defaults, the tuned knobs and pinned memory, per size and direction). The library's
// profile loader reads it back; the writer is here because only `cmt tune` writes profiles.
#pragma once

#include <string>
#include <vector>

#include "config/fingerprint.h"
#include "config/options.h"
#include "engine/device/copy_engine.h"

namespace cmt {

struct MeasuredRow {
  std::size_t bytes = 0;
  Direction direction = Direction::HostToDevice;
  double cuda_gbps = 0, builtin_gbps = 0, tuned_gbps = 0, pinned_gbps = 0;
};

struct TuneRecord {
  std::string search;  // "instant", "full", "grid"
  std::string date;    // ISO 8601, UTC
  double seconds = 0;  // how long the search took
  std::string gpu;     // name and PCI bus id
  std::string mix;     // the copy mix tuned for, as text
  double mix_gbps = 0;
  bool interrupted = false;
  std::vector<MeasuredRow> rows;
  std::vector<std::string> notes;
};

// The profile's text; `tuned` supplies the knobs the option table marks tuned. With `gpu_bus_id`,
// the lane knobs go under [gpu."BUS"] (the threshold stays under [cmt]), merged into `existing`
// (the profile's current text, if any), so tuning each GPU in turn builds one profile.
std::string profile_toml(const MachineFingerprint& machine, const Config& tuned,
                         const TuneRecord& record, const std::string& gpu_bus_id = "",
                         const std::string& existing = "");

}  // namespace cmt
