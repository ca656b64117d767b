// The host as cmt's tuner sees it, read with hwloc: packages, NUMA nodes, cores, core kinds
// (P/E cores), the last-level cache, and each NVIDIA GPU's place on the PCI bus (its NUMA node,
// its local cores and its link speed). Works without a GPU or a driver.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cpu_quota.h"

namespace cmt {

struct CoreKind {
  std::string name;     // hwloc's CoreType when known ("IntelCore", "IntelAtom"), else "kind N"
  int efficiency = -1;  // hwloc's ranking: higher is faster; -1 when unknown
  std::vector<int> cpus;
};

struct GpuPlacement {
  std::string pci_bus_id;  // "0000:1b:00.0"
  unsigned device_id = 0;  // PCI device id (the model)
  int numa_node = -1;
  std::vector<int> local_cpus;
  float link_gbps = 0;  // PCIe link bandwidth per direction as hwloc reports it, 0 if unknown
  // The PCIe root port above it (its bus id; "" if unknown): GPUs behind one root port, as the
  // four of a PCIe switch whose uplink it is, share that one link to the CPU.
  std::string root_port;
};

struct HostTopology {
  std::string cpu_model;
  int packages = 0, numa_nodes = 0, cores = 0, processing_units = 0;
  unsigned long long l3_bytes = 0;  // per instance; 0 if unknown
  std::vector<CoreKind> core_kinds;
  std::vector<GpuPlacement> gpus;
  // This process's CPU quota (common/cpu_quota.h), which hwloc does not see: cmt sizes its copy
  // threads by it as well as by the cores.
  std::optional<CpuQuota> cpu_quota;
  std::string error;  // non-empty if hwloc could not read the machine
};

HostTopology read_topology();

// `cmt bench topo`'s sets of GPUs (CUDA ordinals): each GPU alone, then the GPUs behind each root
// port together (a switch's shared uplink), those of each NUMA node (a socket), and all; groups of
// one and sets already listed are left out.
struct GpuSetMember {
  int ordinal = 0;
  int numa_node = -1;
  std::string root_port;  // "" if unknown: in no root port's set
};
std::vector<std::vector<int>> bandwidth_sets(const std::vector<GpuSetMember>& gpus);

// A readable table, and JSON (for scripts and profiles).
std::string format_topology(const HostTopology& t);
std::string topology_json(const HostTopology& t);

}  // namespace cmt
