#include "common/host_files.h"

#include <sched.h>

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <fstream>

namespace cmt {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::vector<std::string> nvidia_gpu_devices(const std::string& pci_devices) {
  std::vector<std::string> gpus;
  if (DIR* dir = opendir(pci_devices.c_str())) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      const std::string base = pci_devices + "/" + e->d_name + "/";
      // PCI class 0x03xxxx: display controllers (VGA 0x0300, 3D 0x0302).
      if (read_first_line(base + "vendor") == "0x10de" &&
          read_first_line(base + "class").rfind("0x03", 0) == 0)
        gpus.push_back(e->d_name);
    }
    closedir(dir);
  }
  std::sort(gpus.begin(), gpus.end());
  return gpus;
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

}  // namespace cmt
