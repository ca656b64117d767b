// Where a GPU sits relative to the host: its NUMA node and the cores near it, read from sysfs by
// PCI bus id and intersected with the cores this process may run on. The engine pins its workers
// and places its staging memory accordingly. Where several GPUs hang off the same cores, each
// GPU's copy threads may use all of them or a share of their own (GpuCores::Split).
#pragma once

#include <sched.h>

#include <cstddef>
#include <string>
#include <vector>

#include "common/copy_types.h"
#include "common/cpu_quota.h"
#include "common/engine_rules.h"
#include "common/host_files.h"
#include "cuda/driver_api.h"

namespace cmt {

struct GpuLocality {
  int numa_node = -1;     // -1: unknown or a single-node machine
  std::vector<int> cpus;  // cores to run copy workers on; never empty
};

// Parses a Linux cpulist such as "0-7,16-23". Returns false on malformed input.
bool parse_cpu_list(const std::string& text, std::vector<int>* cpus);

// `pci_bus_id` as cuDeviceGetPCIBusId writes it ("0000:1B:00.0"); empty means unknown, in which
// case every core this process may use is returned. With GpuCores::Split, the GPU gets its share
// of the local cores (split_cores) among every GPU whose local cores are the same, whether this
// process uses those GPUs or not: with one process per GPU, as in distributed training, each
// process's threads then keep to their own share too. `sys_root` and `allowed` are for tests.
GpuLocality gpu_locality(const std::string& pci_bus_id, GpuCores cores = GpuCores::All,
                         const std::string& sys_root = "/sys",
                         const std::vector<int>& allowed = allowed_cpus());

// The PCI bus ids (lower case, sorted) of the GPUs (NVIDIA display and 3D controllers) under
// `sys_root` whose local cores are `local_cpulist`'s.
std::vector<std::string> gpus_on_cores(const std::string& sys_root,
                                       const std::vector<int>& local_cpulist);

// Share `index` of `parts` of `cpus`: whole cores (hyperthreads of one core, by `core_of`, the
// core of each of `cpus`, stay together) in contiguous runs, as even as the cores allow. All of
// `cpus` if a share would have fewer than rules::kMinCoreShare of them, since a few cores cannot
// stage at the link's speed anyway and the GPUs are then better off sharing all.
std::vector<int> split_cores(const std::vector<int>& cpus, const std::vector<int>& core_of,
                             std::size_t parts, std::size_t index);

// Copy threads per copy when the configuration says 0: half the GPU's local cores, at most
// rules::kAutoThreadsMost, leaving room for the application and the issuing thread. Callers pass
// usable_cpus(cores) (common/cpu_quota.h): under a CPU quota, half the cores it keeps busy.
unsigned auto_threads(std::size_t local_cpus);


// The PCI bus id of the calling thread's current GPU, or "" (no context, or the driver cannot
// say): what gpu_locality takes.
std::string current_gpu_bus_id(const DriverApi& driver);

// Keeps the calling thread on `cpus` (empty: leaves it be). Best effort: a refusal is ignored.
void pin_current_thread(const std::vector<int>& cpus);

}  // namespace cmt
