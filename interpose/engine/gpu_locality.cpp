#include "engine/gpu_locality.h"

#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "common/host_files.h"

namespace cmt {

std::string current_gpu_bus_id(const DriverApi& driver) {
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  char bus[32] = {};
  if (driver.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx ||
      driver.ctx_get_device(&dev) != CUDA_SUCCESS ||
      driver.device_get_pci_bus_id(bus, sizeof(bus), dev) != CUDA_SUCCESS)
    return "";
  return bus;
}

bool parse_cpu_list(const std::string& text, std::vector<int>* cpus) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.back()))) part.pop_back();
    if (part.empty()) continue;
    std::size_t dash = part.find('-');
    try {
      std::size_t used = 0;
      int lo = std::stoi(part.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? part.size() : dash)) return false;
      int hi = lo;
      if (dash != std::string::npos) {
        std::string tail = part.substr(dash + 1);
        hi = std::stoi(tail, &used);
        if (used != tail.size()) return false;
      }
      if (lo < 0 || hi < lo || hi > 65535) return false;
      for (int c = lo; c <= hi; ++c) out.push_back(c);
    } catch (...) {
      return false;
    }
  }
  *cpus = std::move(out);
  return true;
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

GpuLocality gpu_locality(const std::string& pci_bus_id) {
  GpuLocality loc;
  std::vector<int> allowed = allowed_cpus();
  loc.cpus = allowed;
  if (pci_bus_id.empty()) return loc;
  std::string id = pci_bus_id;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string dir = "/sys/bus/pci/devices/" + id;
  try {
    std::string node = read_first_line(dir + "/numa_node");
    if (!node.empty()) loc.numa_node = std::stoi(node);
  } catch (...) {
    loc.numa_node = -1;
  }
  std::vector<int> local;
  if (parse_cpu_list(read_first_line(dir + "/local_cpulist"), &local)) {
    std::vector<int> both;
    for (int c : local)
      if (std::find(allowed.begin(), allowed.end(), c) != allowed.end()) both.push_back(c);
    if (!both.empty()) loc.cpus = both;
  }
  return loc;
}

void pin_current_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

}  // namespace cmt
