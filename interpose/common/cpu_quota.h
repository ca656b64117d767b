// The CPU bandwidth limit of this process's cgroup: what `docker run --cpus`, a Kubernetes CPU
// limit or systemd's CPUQuota= set. Such a limit leaves every core in the affinity mask, so the
// process sees all of them, but lets its threads together run only `quota` microseconds in each
// `period`; past that the kernel stops every thread of the group until the period ends. cmt's
// copy threads, sized by the cores they see, then spend the group's time twice over and the
// program's own threads wait (measured on an H100 in a 2-CPU group: copies from Python no faster
// than CUDA's default path, against 2.0-2.5x with one copy thread; bench/lab/NOTES.md 98). So the
// thread counts are sized by the cores the quota can keep busy as well as by the affinity.
//
// Read as the kernel applies it: the tightest limit on the path from the process's cgroup up to
// the root of its hierarchy (a limit on a parent binds its children), in cgroup v2 (cpu.max:
// "max 100000" or "200000 100000") and in v1's cpu controller (cpu.cfs_quota_us, -1 for none, and
// cpu.cfs_period_us), the cgroup found through /proc/self/cgroup and the mount through
// /proc/self/mountinfo, as in a container with its own cgroup namespace.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace cmt {

struct CpuQuota {
  double cpus = 0;   // quota / period: how many CPUs' time the group may use
  std::string file;  // the file that sets the tightest limit
  std::string text;  // what it says ("200000 100000"; v1: "200000 / 100000")
};

// The tightest CPU limit on this process's cgroups, or none. `proc` stands for /proc/self and
// `root` is put before every mount point (both for tests). Unreadable or malformed files count as
// no limit (so does a failed allocation): the quota only ever lowers thread counts.
std::optional<CpuQuota> read_cpu_quota(const std::string& proc = "/proc/self",
                                       const std::string& root = "") noexcept;

// This process's quota, read once (a forked child shares its parent's cgroup; a limit changed
// later is not seen).
const std::optional<CpuQuota>& process_cpu_quota() noexcept;

// Of `cpus` cores, how many `quota` can keep busy: its CPUs rounded up, at least 1, at most
// `cpus`; all of them without a quota.
std::size_t cpus_within(std::size_t cpus, const std::optional<CpuQuota>& quota) noexcept;

// cpus_within for this process's quota.
std::size_t usable_cpus(std::size_t cpus) noexcept;

// "2 CPUs (/sys/fs/cgroup/app/cpu.max: 200000 100000)", for messages.
std::string describe(const CpuQuota& quota);

}  // namespace cmt
