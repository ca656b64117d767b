#include "engine/shared/gpu_locality.h"

#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <utility>

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

std::vector<std::string> gpus_on_cores(const std::string& sys_root,
                                       const std::vector<int>& local_cpulist) {
  const std::string pci = sys_root + "/bus/pci/devices";
  std::vector<std::string> out;
  for (const std::string& gpu : nvidia_gpu_devices(pci)) {
    std::vector<int> local;
    if (parse_cpu_list(read_first_line(pci + "/" + gpu + "/local_cpulist"), &local) &&
        local == local_cpulist)
      out.push_back(gpu);
  }
  return out;
}

std::vector<int> split_cores(const std::vector<int>& cpus, const std::vector<int>& core_of,
                             std::size_t parts, std::size_t index) {
  if (parts <= 1 || index >= parts || core_of.size() != cpus.size()) return cpus;
  std::vector<std::pair<int, int>> by_core;  // (core, cpu)
  for (std::size_t i = 0; i < cpus.size(); ++i) by_core.emplace_back(core_of[i], cpus[i]);
  std::sort(by_core.begin(), by_core.end());
  std::vector<std::vector<int>> cores;
  for (std::size_t i = 0; i < by_core.size(); ++i) {
    if (i == 0 || by_core[i].first != by_core[i - 1].first) cores.emplace_back();
    cores.back().push_back(by_core[i].second);
  }
  // Share k takes cores [k * n / parts, (k + 1) * n / parts): contiguous, sizes differing by at
  // most one core. Every GPU decides alone, so the fallback must be the same for all: any share
  // too small, and none splits.
  const std::size_t n = cores.size();
  std::vector<int> mine;
  for (std::size_t k = 0; k < parts; ++k) {
    std::vector<int> share;
    for (std::size_t c = k * n / parts; c < (k + 1) * n / parts; ++c)
      share.insert(share.end(), cores[c].begin(), cores[c].end());
    if (share.size() < rules::kMinCoreShare) return cpus;
    if (k == index) mine = std::move(share);
  }
  std::sort(mine.begin(), mine.end());
  return mine;
}

namespace {

// The core a CPU belongs to: the first of its hyperthread siblings (itself if sysfs cannot say).
int core_of_cpu(const std::string& sys_root, int cpu) {
  std::vector<int> siblings;
  const std::string path =
      sys_root + "/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list";
  if (!parse_cpu_list(read_first_line(path), &siblings) || siblings.empty()) return cpu;
  return *std::min_element(siblings.begin(), siblings.end());
}

}  // namespace

GpuLocality gpu_locality(const std::string& pci_bus_id, GpuCores cores, const std::string& sys_root,
                         const std::vector<int>& allowed) {
  GpuLocality loc;
  loc.cpus = allowed.empty() ? std::vector<int>{0} : allowed;
  if (pci_bus_id.empty()) return loc;
  std::string id = pci_bus_id;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string dir = sys_root + "/bus/pci/devices/" + id;
  try {
    std::string node = read_first_line(dir + "/numa_node");
    if (!node.empty()) loc.numa_node = std::stoi(node);
  } catch (...) {
    loc.numa_node = -1;
  }
  std::vector<int> local;
  if (!parse_cpu_list(read_first_line(dir + "/local_cpulist"), &local)) return loc;
  std::vector<int> both;
  for (int c : local)
    if (std::find(allowed.begin(), allowed.end(), c) != allowed.end()) both.push_back(c);
  if (both.empty()) return loc;
  loc.cpus = both;
  if (cores == GpuCores::Split) {
    const std::vector<std::string> gpus = gpus_on_cores(sys_root, local);
    const auto me = std::find(gpus.begin(), gpus.end(), id);
    if (gpus.size() > 1 && me != gpus.end()) {
      std::vector<int> core_of;
      for (int c : both) core_of.push_back(core_of_cpu(sys_root, c));
      loc.cpus =
          split_cores(both, core_of, gpus.size(), static_cast<std::size_t>(me - gpus.begin()));
    }
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

unsigned auto_threads(std::size_t local_cpus) {
  return static_cast<unsigned>(std::clamp<std::size_t>(local_cpus / 2, 1, rules::kAutoThreadsMost));
}

}  // namespace cmt
