#include "topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "config/tomlpp.h"

namespace cmt {
namespace {

std::vector<int> cpus_of(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (!set) return out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

constexpr unsigned kNvidiaVendor = 0x10de;

std::string bus_id(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a) {
  char bus[32];
  std::snprintf(bus, sizeof(bus), "%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
  return bus;
}

// The topmost PCI-to-PCI bridge above a device, the one whose parent is the host bridge.
std::string root_port_of(hwloc_obj_t device) {
  std::string port;
  for (hwloc_obj_t up = device->parent; up && up->type == HWLOC_OBJ_BRIDGE; up = up->parent) {
    if (up->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) break;  // the host bridge
    port = bus_id(up->attr->bridge.upstream.pci);
  }
  return port;
}

}  // namespace

HostTopology read_topology() {
  HostTopology t;
  t.cpu_quota = process_cpu_quota();
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) {
    t.error = "hwloc_topology_init failed";
    return t;
  }
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo) != 0) {
    t.error = "hwloc_topology_load failed";
    hwloc_topology_destroy(topo);
    return t;
  }
  t.packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  t.numa_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  t.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  t.processing_units = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  if (hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0))
    if (const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModel")) t.cpu_model = model;
  if (hwloc_obj_t l3 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_L3CACHE, 0))
    t.l3_bytes = l3->attr->cache.size;

  int kinds = hwloc_cpukinds_get_nr(topo, 0);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int k = 0; k < kinds; ++k) {
    CoreKind kind;
    unsigned nr_infos = 0;
    struct hwloc_info_s* infos = nullptr;
    if (hwloc_cpukinds_get_info(topo, static_cast<unsigned>(k), set, &kind.efficiency, &nr_infos,
                                &infos, 0) != 0)
      continue;
    kind.name = "kind " + std::to_string(k);
    for (unsigned i = 0; i < nr_infos; ++i)
      if (std::string(infos[i].name) == "CoreType") kind.name = infos[i].value;
    kind.cpus = cpus_of(set);
    t.core_kinds.push_back(kind);
  }
  hwloc_bitmap_free(set);

  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    const auto& a = pci->attr->pcidev;
    unsigned cls = a.class_id >> 8;  // 0x03: display controller (VGA 0x0300, 3D 0x0302)
    if (a.vendor_id != kNvidiaVendor || cls != 0x03) continue;
    GpuPlacement g;
    g.pci_bus_id = bus_id(a);
    g.root_port = root_port_of(pci);
    g.device_id = a.device_id;
    g.link_gbps = a.linkspeed;
    if (hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topo, pci)) {
      g.local_cpus = cpus_of(parent->cpuset);
      if (parent->nodeset && hwloc_bitmap_weight(parent->nodeset) == 1)
        g.numa_node = hwloc_bitmap_first(parent->nodeset);
    }
    t.gpus.push_back(g);
  }
  hwloc_topology_destroy(topo);
  return t;
}

std::vector<std::vector<int>> bandwidth_sets(const std::vector<GpuSetMember>& gpus) {
  std::vector<std::vector<int>> sets;
  auto add = [&](std::vector<int> set) {
    std::sort(set.begin(), set.end());
    if (std::find(sets.begin(), sets.end(), set) == sets.end()) sets.push_back(set);
  };
  for (const GpuSetMember& g : gpus) add({g.ordinal});
  std::map<std::string, std::vector<int>> by_port;
  std::map<int, std::vector<int>> by_node;
  for (const GpuSetMember& g : gpus) {
    if (!g.root_port.empty()) by_port[g.root_port].push_back(g.ordinal);
    by_node[g.numa_node].push_back(g.ordinal);
  }
  for (auto& [port, set] : by_port)
    if (set.size() > 1) add(set);
  for (auto& [node, set] : by_node)
    if (set.size() > 1) add(set);
  std::vector<int> all;
  for (const GpuSetMember& g : gpus) all.push_back(g.ordinal);
  if (all.size() > 1) add(all);
  return sets;
}

std::string format_topology(const HostTopology& t) {
  std::ostringstream out;
  if (!t.error.empty()) out << "error: " << t.error << "\n";
  out << "CPU        " << (t.cpu_model.empty() ? "unknown" : t.cpu_model) << "\n"
      << "layout     " << t.packages << " package(s), " << t.numa_nodes << " NUMA node(s), "
      << t.cores << " core(s), " << t.processing_units << " hardware thread(s)\n";
  if (t.l3_bytes) out << "L3         " << (t.l3_bytes >> 20) << " MiB per instance\n";
  if (t.cpu_quota)
    out << "CPU quota  " << describe(*t.cpu_quota) << ": cmt's copy threads are sized by it\n";
  for (const CoreKind& k : t.core_kinds)
    out << "core kind  " << k.name << " (efficiency " << k.efficiency << "): cpus "
        << cpu_list(k.cpus) << "\n";
  if (t.gpus.empty()) {
    out << "GPUs       no NVIDIA GPU found on the PCI bus\n";
  } else {
    out << "GPU  PCI bus        device  NUMA  link GB/s  root port      local cpus\n";
    for (std::size_t i = 0; i < t.gpus.size(); ++i) {
      const GpuPlacement& g = t.gpus[i];
      char line[160];
      std::snprintf(line, sizeof(line), "%-4zu %-14s 0x%04x  %4d  %9.1f  %-14s %s\n", i,
                    g.pci_bus_id.c_str(), g.device_id, g.numa_node, g.link_gbps,
                    g.root_port.empty() ? "-" : g.root_port.c_str(),
                    cpu_list(g.local_cpus).c_str());
      out << line;
    }
  }
  return out.str();
}

std::string topology_json(const HostTopology& t) {
  auto int_array = [](const std::vector<int>& v) {
    toml::array a;
    for (int x : v) a.push_back(x);
    return a;
  };
  toml::array kinds, gpus;
  for (const CoreKind& k : t.core_kinds)
    kinds.push_back(
        toml::table{{"name", k.name}, {"efficiency", k.efficiency}, {"cpus", int_array(k.cpus)}});
  for (const GpuPlacement& g : t.gpus)
    gpus.push_back(toml::table{{"pci_bus_id", g.pci_bus_id},
                               {"device_id", static_cast<int64_t>(g.device_id)},
                               {"numa_node", g.numa_node},
                               {"link_gbps", static_cast<double>(g.link_gbps)},
                               {"root_port", g.root_port},
                               {"local_cpus", int_array(g.local_cpus)}});
  toml::table root{{"cpu_model", t.cpu_model},
                   {"packages", t.packages},
                   {"numa_nodes", t.numa_nodes},
                   {"cores", t.cores},
                   {"processing_units", t.processing_units},
                   {"l3_bytes", static_cast<int64_t>(t.l3_bytes)},
                   {"core_kinds", kinds},
                   {"gpus", gpus}};
  if (t.cpu_quota)
    root.insert("cpu_quota", toml::table{{"cpus", t.cpu_quota->cpus},
                                         {"file", t.cpu_quota->file},
                                         {"text", t.cpu_quota->text}});
  if (!t.error.empty()) root.insert("error", t.error);
  std::ostringstream out;
  out << toml::json_formatter{root} << "\n";
  return out.str();
}

}  // namespace cmt
