// Reading the small one-line files of /proc and /sys (numa_node, vendor, link speed ...), and
// the cores this process may run on.
#pragma once

#include <string>
#include <vector>

namespace cmt {

// The file's first line without trailing whitespace; "" if it cannot be read.
std::string read_first_line(const std::string& path);

// The NVIDIA GPUs (display and 3D controllers) among the PCI devices under `pci_devices`
// (/sys/bus/pci/devices): their directory names, the bus ids in lower case, sorted.
std::vector<std::string> nvidia_gpu_devices(const std::string& pci_devices);

// The cores this process may run on (its affinity; core 0 if it cannot be read).
std::vector<int> allowed_cpus();

}  // namespace cmt
