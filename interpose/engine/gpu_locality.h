// Where a GPU sits relative to the host: its NUMA node and the cores near it, read from sysfs by
// PCI bus id and intersected with the cores this process may run on. The engine pins its workers
// and places its staging memory accordingly.
#pragma once

#include <sched.h>

#include <string>
#include <vector>

#include "cuda/driver_api.h"

namespace cmt {

struct GpuLocality {
  int numa_node = -1;     // -1: unknown or a single-node machine
  std::vector<int> cpus;  // cores to run copy workers on; never empty
};

// Parses a Linux cpulist such as "0-7,16-23". Returns false on malformed input.
bool parse_cpu_list(const std::string& text, std::vector<int>* cpus);

// `pci_bus_id` as cuDeviceGetPCIBusId writes it ("0000:1B:00.0"); empty means unknown, in which
// case every core this process may use is returned.
GpuLocality gpu_locality(const std::string& pci_bus_id);

// The PCI bus id of the calling thread's current GPU, or "" (no context, or the driver cannot
// say): what gpu_locality takes.
std::string current_gpu_bus_id(const DriverApi& driver);

// The cores this process may run on.
std::vector<int> allowed_cpus();

// Keeps the calling thread on `cpus` (empty: leaves it be). Best effort: a refusal is ignored.
void pin_current_thread(const std::vector<int>& cpus);

}  // namespace cmt
