#include "stats_files.h"

#include <glob.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace cmt {
namespace {

// The number after "key": at or past `from` in libcmt.so's own JSON (a fixed shape); false if
// the key is not there.
bool number_after(const std::string& json, std::size_t from, const char* key, double* out) {
  const std::string quoted = std::string("\"") + key + "\": ";
  const std::size_t at = json.find(quoted, from);
  if (at == std::string::npos) return false;
  *out = std::strtod(json.c_str() + at + quoted.size(), nullptr);
  return true;
}

std::uint64_t count_after(const std::string& json, std::size_t from, const char* key) {
  double v = 0;
  return number_after(json, from, key, &v) ? static_cast<std::uint64_t>(v) : 0;
}

// "h2d": [[low, calls, bytes], ...] inside "sizes".
void add_sizes(const std::string& json, const char* dir, StatsSum::Direction* d) {
  const std::size_t sizes = json.find("\"sizes\"");
  if (sizes == std::string::npos) return;
  const std::size_t at = json.find(std::string("\"") + dir + "\": [", sizes);
  if (at == std::string::npos) return;
  const char* p = json.c_str() + json.find('[', at) + 1;
  unsigned long long low, calls, bytes;
  int used = 0;
  while (std::sscanf(p, " [%llu, %llu, %llu]%n", &low, &calls, &bytes, &used) == 3) {
    p += used;
    auto& row = d->sizes[low];
    row.first += calls;
    row.second += bytes;
    while (*p == ',' || *p == ' ') ++p;
  }
}

void add_direction(const std::string& json, const char* dir, StatsSum::Direction* d) {
  const std::size_t taken = json.find("\"taken\"");
  const std::size_t at = json.find(std::string("\"") + dir + "\": {", taken);
  if (taken == std::string::npos || at == std::string::npos) return;
  d->calls += count_after(json, at, "calls");
  d->bytes += count_after(json, at, "bytes");
  double s = 0;
  if (number_after(json, at, "seconds", &s)) d->seconds += s;
  add_sizes(json, dir, d);
}

}  // namespace

std::vector<std::string> stats_files(const std::string& pattern) {
  const std::size_t p = pattern.find("%p");
  if (p == std::string::npos) return {pattern};
  std::string wildcard = pattern;
  for (std::size_t at; (at = wildcard.find("%p")) != std::string::npos;)
    wildcard.replace(at, 2, "[0-9]*");
  std::vector<std::string> out;
  glob_t found{};
  if (glob(wildcard.c_str(), 0, nullptr, &found) == 0)
    for (std::size_t i = 0; i < found.gl_pathc; ++i) out.push_back(found.gl_pathv[i]);
  globfree(&found);
  return out;
}

bool add_stats_file(const std::string& path, StatsSum* sum, std::string* error) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  if (!in || json.find("\"taken\"") == std::string::npos) {
    *error = path + ": not a statistics file of cmt's (no \"taken\")";
    return false;
  }
  ++sum->processes;
  add_direction(json, "h2d", &sum->h2d);
  add_direction(json, "d2h", &sum->d2h);
  const std::size_t host = json.find("\"host_copies\"");
  if (host != std::string::npos) {
    const std::size_t fills = json.find("\"fills\"", host);
    sum->host_calls += count_after(json, host, "calls");
    sum->host_bytes += count_after(json, host, "bytes");
    sum->host_faults += count_after(json, host, "faults");
    if (fills != std::string::npos) {
      sum->fill_calls += count_after(json, fills, "calls");
      sum->fill_bytes += count_after(json, fills, "bytes");
      sum->host_faults += count_after(json, fills, "faults");
    }
  }
  const std::size_t threads = json.find("\"copy_threads\"");
  if (threads != std::string::npos) {
    double s = 0;
    if (number_after(json, threads, "cpu_seconds", &s)) sum->copy_threads_cpu_s += s;
    sum->copy_threads_bytes += count_after(json, threads, "bytes_taken");
  }
  return true;
}

std::string describe_sum(const StatsSum& sum) {
  auto dir = [](const char* name, const StatsSum::Direction& d) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s %llu (%.2f GiB, %.1f GB/s)", name,
                  static_cast<unsigned long long>(d.calls), static_cast<double>(d.bytes) / (1u << 30),
                  d.seconds > 0 ? static_cast<double>(d.bytes) / d.seconds / 1e9 : 0.0);
    return std::string(buf);
  };
  char host[200];
  std::snprintf(host, sizeof(host), "; host copies %llu (%.2f GiB), fills %llu (%.2f GiB)",
                static_cast<unsigned long long>(sum.host_calls),
                static_cast<double>(sum.host_bytes) / (1u << 30),
                static_cast<unsigned long long>(sum.fill_calls),
                static_cast<double>(sum.fill_bytes) / (1u << 30));
  char threads[120];
  std::snprintf(threads, sizeof(threads), "; cmt's copy threads %.2f CPU s (%.2f s per GB taken)",
                sum.copy_threads_cpu_s,
                sum.copy_threads_bytes
                    ? sum.copy_threads_cpu_s / (static_cast<double>(sum.copy_threads_bytes) / 1e9)
                    : 0.0);
  if (sum.processes == 0) return "processes: none used CUDA (none wrote statistics)";
  return "processes that used CUDA: " + std::to_string(sum.processes) +
         "; copies taken: " + dir("H2D", sum.h2d) + ", " + dir("D2H", sum.d2h) + host + threads;
}

}  // namespace cmt
