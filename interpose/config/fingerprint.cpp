#include "config/fingerprint.h"

#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common/host_files.h"

namespace cmt {
namespace {

std::string cpuinfo_model(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      std::size_t colon = line.find(':');
      if (colon == std::string::npos) break;
      std::string v = line.substr(colon + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return "";
}

int count_cpus(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line))
    if (line.rfind("processor", 0) == 0) ++n;
  return n;
}

std::uint32_t fnv1a(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

}  // namespace

std::string MachineFingerprint::key() const {
  // Up to four telling words of the CPU model, the counts, and a hash of the whole identity.
  std::string words, token;
  int kept = 0;
  auto flush = [&] {
    bool noise = token.empty() || token == "r" || token == "tm" || token == "cpu" ||
                 token == "processor" || token.find("ghz") != std::string::npos;
    if (!noise && kept < 4) {
      words += (words.empty() ? "" : "-") + token;
      ++kept;
    }
    token.clear();
  };
  for (char c : cpu_model) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      token += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else
      flush();
  }
  flush();
  std::string identity = cpu_model + "|" + std::to_string(cpus);
  for (const std::string& g : gpus) identity += "|" + g;
  std::string gpu = gpus.empty() ? "nogpu" : gpus.front().substr(gpus.front().find(':') + 1);
  char hash[16];
  std::snprintf(hash, sizeof(hash), "%08x", fnv1a(identity));
  return (words.empty() ? std::string("cpu") : words) + "-" + std::to_string(cpus) + "cpu-" + gpu +
         "x" + std::to_string(gpus.size()) + "-" + hash;
}

MachineFingerprint read_fingerprint(const std::string& root) {
  MachineFingerprint m;
  m.cpu_model = cpuinfo_model(root + "/proc/cpuinfo");
  m.cpus = count_cpus(root + "/proc/cpuinfo");
  if (m.cpus == 0 && root.empty()) m.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_CONF));
  const std::string pci = root + "/sys/bus/pci/devices";
  for (const std::string& d : nvidia_gpu_devices(pci)) {
    const std::string base = pci + "/" + d + "/";
    std::string device = read_first_line(base + "device");
    if (device.rfind("0x", 0) == 0) device = device.substr(2);
    m.gpus.push_back("10de:" + device);
    if (m.pcie.empty()) {
      std::string speed = read_first_line(base + "current_link_speed");
      std::string width = read_first_line(base + "current_link_width");
      if (!speed.empty()) m.pcie = speed + (width.empty() ? "" : " x" + width);
    }
  }
  m.driver = read_first_line(root + "/sys/module/nvidia/version");
  return m;
}

std::string user_profile_path(const MachineFingerprint& machine) {
  std::string dir;
  // secure_getenv: a setuid process reads no profile of the invoking user's choosing.
  if (const char* xdg = secure_getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    dir = xdg;
  else if (const char* home = secure_getenv("HOME"); home && *home)
    dir = std::string(home) + "/.config";
  else
    return "";
  return dir + "/cmt/profiles/" + machine.key() + ".toml";
}

}  // namespace cmt
