#include "common/cpu_quota.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/host_files.h"

namespace cmt {
namespace {

// A cgroup hierarchy's mount: the cgroup it shows (its root within the hierarchy, "/" but for a
// bind mount of a subtree) and where.
struct CgroupMount {
  std::string root;
  std::string point;
};

// mountinfo writes a space, tab, newline or backslash in a path as \ and three octal digits.
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto octal = [&](std::size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '7'; };
    if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool has_item(const std::string& comma_list, const std::string& item) {
  std::stringstream in(comma_list);
  std::string part;
  while (std::getline(in, part, ','))
    if (part == item) return true;
  return false;
}

// The mounts of cgroup v2 (`v2`) or of the v1 hierarchy that holds the cpu controller. A line:
// "ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS".
std::vector<CgroupMount> cgroup_mounts(const std::string& mountinfo, bool v2) {
  std::vector<CgroupMount> mounts;
  std::ifstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    std::size_t dash = 6;
    while (dash < w.size() && w[dash] != "-") ++dash;
    if (dash + 3 >= w.size()) continue;
    const std::string& type = w[dash + 1];
    if (v2 ? type == "cgroup2" : type == "cgroup" && has_item(w[dash + 3], "cpu"))
      mounts.push_back({unescape(w[3]), unescape(w[4])});
  }
  return mounts;
}

// The process's cgroup in that hierarchy, from /proc/self/cgroup ("0::/PATH" in v2,
// "ID:cpu,cpuacct:/PATH" in v1); "" if it has none there.
std::string cgroup_path(const std::string& cgroup_file, bool v2) {
  std::ifstream in(cgroup_file);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? id == "0" && controllers.empty() : has_item(controllers, "cpu"))
      return line.substr(b + 1);
  }
  return "";
}

bool read_count(const std::string& text, long long* value) {
  char* end = nullptr;
  *value = std::strtoll(text.c_str(), &end, 10);
  return !text.empty() && end && *end == '\0';
}

// The limit set in one cgroup's directory, if any.
std::optional<CpuQuota> limit_in(const std::string& dir, bool v2) {
  long long quota = 0, period = 0;
  CpuQuota q;
  if (v2) {
    q.file = dir + "/cpu.max";
    q.text = read_first_line(q.file);
    const std::size_t space = q.text.find(' ');
    if (space == std::string::npos || !read_count(q.text.substr(0, space), &quota) ||
        !read_count(q.text.substr(space + 1), &period))
      return std::nullopt;  // "max ..." (no limit), absent, or malformed
  } else {
    q.file = dir + "/cpu.cfs_quota_us";
    const std::string quota_text = read_first_line(q.file);
    const std::string period_text = read_first_line(dir + "/cpu.cfs_period_us");
    if (!read_count(quota_text, &quota) || !read_count(period_text, &period)) return std::nullopt;
    q.text = quota_text + " / " + period_text;
  }
  if (quota <= 0 || period <= 0) return std::nullopt;  // v1's -1: no limit
  q.cpus = static_cast<double>(quota) / static_cast<double>(period);
  return q;
}

// The tightest limit from the process's cgroup up to the top of the hierarchy as mounted.
std::optional<CpuQuota> tightest(const std::string& proc, const std::string& root, bool v2) {
  const std::string path = cgroup_path(proc + "/cgroup", v2);
  if (path.empty() || path[0] != '/' || path.find("/..") != std::string::npos) return std::nullopt;
  for (const CgroupMount& m : cgroup_mounts(proc + "/mountinfo", v2)) {
    std::string below;  // the cgroup's path below the mount's root
    if (m.root == "/")
      below = path;
    else if (path == m.root || path.compare(0, m.root.size() + 1, m.root + "/") == 0)
      below = path.substr(m.root.size());
    else
      continue;  // another subtree's mount
    std::string top = root + m.point;
    while (!top.empty() && top.back() == '/') top.pop_back();
    if (below == "/") below.clear();
    std::string dir = top + below;
    std::optional<CpuQuota> best;
    for (;;) {
      std::optional<CpuQuota> here = limit_in(dir, v2);
      if (here && (!best || here->cpus < best->cpus)) best = here;
      if (dir.size() <= top.size()) break;
      dir.erase(dir.rfind('/'));
    }
    return best;
  }
  return std::nullopt;
}

}  // namespace

std::optional<CpuQuota> read_cpu_quota(const std::string& proc, const std::string& root) noexcept {
  try {  // libcmt.so reads it inside the program: an allocation failing means no limit known
    std::optional<CpuQuota> v2 = tightest(proc, root, true), v1 = tightest(proc, root, false);
    if (v2 && v1) return v1->cpus < v2->cpus ? v1 : v2;
    return v2 ? v2 : v1;
  } catch (...) {
    return std::nullopt;
  }
}

const std::optional<CpuQuota>& process_cpu_quota() noexcept {
  static const std::optional<CpuQuota> quota = read_cpu_quota();
  return quota;
}

std::size_t cpus_within(std::size_t cpus, const std::optional<CpuQuota>& quota) noexcept {
  if (!quota) return cpus;
  const double most = std::max(1.0, std::ceil(quota->cpus - 1e-9));
  return std::min<std::size_t>(cpus, static_cast<std::size_t>(most));
}

std::size_t usable_cpus(std::size_t cpus) noexcept {
  return cpus_within(cpus, process_cpu_quota());
}

std::string describe(const CpuQuota& quota) {
  char cpus[32];
  std::snprintf(cpus, sizeof cpus, "%.4g", quota.cpus);
  return std::string(cpus) + (quota.cpus == 1 ? " CPU (" : " CPUs (") + quota.file + ": " +
         quota.text + ")";
}

}  // namespace cmt
