// The CPU quota reader (common/cpu_quota.h) against stand-ins for /proc/self and /sys/fs/cgroup
// as cgroup v2 containers, nested groups, systemd's hybrid layout and v1 hierarchies show them;
// and the thread caps it leads to (config/profile.h's cap_threads).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/cpu_quota.h"
#include "config/profile.h"
#include "temp_files.h"

namespace cmt {
namespace {

// A machine stand-in: `proc` holds cgroup and mountinfo; mount points lie under `root`.
struct Machine {
  std::string root = temp_dir();
  std::string proc = root + "/proc";
  ~Machine() { remove_tree(root); }
  void cgroup(const std::string& text) { write_file(proc + "/cgroup", text); }
  void mountinfo(const std::string& text) { write_file(proc + "/mountinfo", text); }
  void file(const std::string& path, const std::string& text) { write_file(root + path, text); }
  std::optional<CpuQuota> quota() const { return read_cpu_quota(proc, root); }
};

const char* kV2Mount =
    "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
    "32 23 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

TEST(CpuQuota, ContainerWithItsOwnNamespace) {
  Machine m;  // docker --cpus=2 with cgroupns=private: the group is the mount's root
  m.cgroup("0::/\n");
  m.mountinfo(kV2Mount);
  m.file("/sys/fs/cgroup/cpu.max", "200000 100000\n");
  const auto q = m.quota();
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(q->cpus, 2.0);
  EXPECT_EQ(q->file, m.root + "/sys/fs/cgroup/cpu.max");
  EXPECT_EQ(q->text, "200000 100000");
  EXPECT_EQ(describe(*q), "2 CPUs (" + m.root + "/sys/fs/cgroup/cpu.max: 200000 100000)");
}

TEST(CpuQuota, TheTightestOnThePathUpBinds) {
  Machine m;  // a pod limited to 1.5 CPUs, its container to 4, the group itself unlimited
  m.cgroup("0::/kubepods/pod1/ctr\n");
  m.mountinfo(kV2Mount);
  m.file("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
  m.file("/sys/fs/cgroup/kubepods/pod1/cpu.max", "150000 100000\n");
  m.file("/sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
  m.file("/sys/fs/cgroup/kubepods/pod1/ctr/sub/cpu.max", "10000 100000\n");  // a child: not ours
  const auto q = m.quota();
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(q->cpus, 1.5);
  EXPECT_EQ(q->file, m.root + "/sys/fs/cgroup/kubepods/pod1/cpu.max");
  EXPECT_EQ(cpus_within(16, q), 2u);  // rounded up
  EXPECT_EQ(describe(*q).substr(0, 10), "1.5 CPUs (");
}

TEST(CpuQuota, NoLimitAnywhere) {
  Machine m;
  m.cgroup("0::/user.slice/session-1.scope\n");
  m.mountinfo(kV2Mount);
  m.file("/sys/fs/cgroup/user.slice/session-1.scope/cpu.max", "max 100000\n");
  EXPECT_FALSE(m.quota());
  EXPECT_EQ(cpus_within(16, m.quota()), 16u);
  Machine bare;  // no cgroup files at all (an unreadable /proc)
  EXPECT_FALSE(bare.quota());
}

TEST(CpuQuota, MalformedFilesCountAsNoLimit) {
  for (const char* text : {"", "200000", "abc 100000", "200000 0", "-5 100000", "200000 1e5"}) {
    Machine m;
    m.cgroup("0::/a\n");
    m.mountinfo(kV2Mount);
    m.file("/sys/fs/cgroup/a/cpu.max", std::string(text) + "\n");
    EXPECT_FALSE(m.quota()) << "'" << text << "'";
  }
}

TEST(CpuQuota, CgroupV1CpuHierarchy) {
  Machine m;  // systemd's hybrid layout: v1 controllers, an empty v2 hierarchy beside them
  m.cgroup(
      "4:memory:/process_api/x\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n0::/docker/abc\n");
  m.mountinfo(
      "25 24 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
      "26 25 0:23 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
      "28 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
      "29 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n");
  m.file("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "50000\n");
  m.file("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  m.file("/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us", "-1\n");
  m.file("/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_period_us", "100000\n");
  const auto q = m.quota();
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(q->cpus, 0.5);
  EXPECT_EQ(q->text, "50000 / 100000");
  EXPECT_EQ(cpus_within(16, q), 1u);  // never below one
}

TEST(CpuQuota, BindMountOfASubtreeAndEscapedPaths) {
  Machine m;  // the hierarchy's /ctr mounted at "/sys/fs/cgroup my" (a space, written \040)
  m.cgroup("0::/ctr/job\n");
  m.mountinfo("40 23 0:28 /ctr /sys/fs/cgroup\\040my rw - cgroup2 cgroup2 rw\n");
  m.file("/sys/fs/cgroup my/job/cpu.max", "max 100000\n");
  m.file("/sys/fs/cgroup my/cpu.max", "300000 100000\n");
  const auto q = m.quota();
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(q->cpus, 3.0);
  Machine outside;  // a group outside what the mount shows (another subtree, or "/..")
  outside.cgroup("0::/other/job\n");
  outside.mountinfo("40 23 0:28 /ctr /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  outside.file("/sys/fs/cgroup/cpu.max", "100000 100000\n");
  EXPECT_FALSE(outside.quota());
  outside.cgroup("0::/../../x\n");
  EXPECT_FALSE(outside.quota());
}

CpuQuota quota_of(double cpus) {
  CpuQuota q;
  q.cpus = cpus;
  q.file = "/sys/fs/cgroup/cpu.max";
  q.text = std::to_string(static_cast<long>(cpus * 100000)) + " 100000";
  return q;
}

TEST(CpuQuota, CapsThreadsFromProfilesAndKeepsTheEnvironments) {
  Config c;  // a shared profile tuned on the whole machine, in a 2-CPU container
  c.threads = 8;
  c.origin["threads"] = "profile configs/x.toml";
  c.per_gpu["0000:1b:00.0"] = {{"threads", "6"}};
  std::vector<std::string> warnings;
  cap_threads(c, 16, &warnings, quota_of(2));
  EXPECT_EQ(c.threads, 2u);
  EXPECT_EQ(c.per_gpu["0000:1b:00.0"]["threads"], "2");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0],
            "threads (profile configs/x.toml) = 8 is more than this process's CPU quota keeps "
            "busy, 2 CPUs (/sys/fs/cgroup/cpu.max: 200000 100000); using 2");
  Config env;  // the user's own CMT_THREADS: kept, and said
  env.threads = 8;
  env.origin["threads"] = "env CMT_THREADS";
  warnings.clear();
  cap_threads(env, 16, &warnings, quota_of(2));
  EXPECT_EQ(env.threads, 8u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("kept, as set in the environment"), std::string::npos);
  Config past;  // past the cores as well: the cores cap first, always
  past.threads = 64;
  past.origin["threads"] = "env CMT_THREADS";
  warnings.clear();
  cap_threads(past, 4, &warnings, quota_of(2));
  EXPECT_EQ(past.threads, 4u);
  EXPECT_EQ(warnings.size(), 2u);
  Config within;  // within the quota, or automatic (0): nothing to say
  within.threads = 2;
  warnings.clear();
  cap_threads(within, 16, &warnings, quota_of(2.5));
  Config automatic;
  cap_threads(automatic, 16, &warnings, quota_of(2));
  EXPECT_EQ(within.threads, 2u);
  EXPECT_EQ(automatic.threads, 0u);
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace cmt
