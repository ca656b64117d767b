// The identity of a machine for profiles: CPU model and count, the NVIDIA GPUs' PCI ids and link,
// the driver version. Read from /proc and /sys alone (no CUDA, no hwloc), so libcmt.so and cmt
// compute the same one. Identity is CPU model, CPU count and GPU models; link and driver are
// details a profile may differ in with a warning.
#pragma once

#include <string>
#include <vector>

namespace cmt {

struct MachineFingerprint {
  std::string cpu_model;
  int cpus = 0;
  std::vector<std::string> gpus;  // "10de:2335" per NVIDIA GPU, in PCI order
  std::string pcie;               // the first GPU's link, e.g. "32.0 GT/s PCIe x16"; "" if unknown
  std::string driver;             // NVIDIA kernel module version; "" if unknown

  // A file-name-safe key for this machine's identity, e.g. "intel-xeon-16cpu-2335x1-1a2b3c4d".
  std::string key() const;
};

// `root` prefixes /proc and /sys (tests point it at a fake tree).
MachineFingerprint read_fingerprint(const std::string& root = "");

// Where this user's tuned profile for `machine` lives: $XDG_CONFIG_HOME/cmt/profiles/KEY.toml,
// else ~/.config/cmt/profiles/KEY.toml; "" if neither variable is set, or in a secure-execution
// (setuid) process.
std::string user_profile_path(const MachineFingerprint& machine);

}  // namespace cmt
