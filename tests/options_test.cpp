// The option table: sizes with suffixes, ranges, and bad values that name the variable, the value
// and what was expected while the default stays in force.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "common/log.h"
#include "config/options.h"
#include "engine/shared/gpu_locality.h"
#include "temp_files.h"

namespace cmt {
namespace {

TEST(Options, ParsesByteSizes) {
  std::size_t n = 0;
  EXPECT_TRUE(parse_byte_size("4096", &n));
  EXPECT_EQ(n, 4096u);
  EXPECT_TRUE(parse_byte_size("64K", &n));
  EXPECT_EQ(n, 64u << 10);
  EXPECT_TRUE(parse_byte_size("2MiB", &n));
  EXPECT_EQ(n, 2u << 20);
  EXPECT_TRUE(parse_byte_size("1g", &n));
  EXPECT_EQ(n, 1u << 30);
  EXPECT_TRUE(parse_byte_size("3MB", &n));
  EXPECT_EQ(n, 3u << 20);
  for (const char* bad :
       {"", "M", "1.5M", "-1", "12Q", "1MiBs", "99999999999999999999999", "4 M", "16777216T"})
    EXPECT_FALSE(parse_byte_size(bad, &n)) << bad;
}

TEST(Options, EnvironmentOverridesDefaults) {
  std::map<std::string, std::string> env = {
      {"CMT_THREADS", "6"},           {"CMT_CHUNK_BYTES", "1M"}, {"CMT_SLOTS", "16"},
      {"CMT_THRESHOLD", "512K"},      {"CMT_DISABLE", "yes"},    {"CMT_D2H_METHOD", "memcpy"},
      {"CMT_FRESH_PAGES", "Populate"}};
  Config c;
  std::vector<std::string> errors;
  apply_environment(c, errors, [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(c.threads, 6u);
  EXPECT_EQ(c.chunk_bytes, 1u << 20);
  EXPECT_EQ(c.slots, 16u);
  EXPECT_EQ(c.threshold, 512u << 10);
  EXPECT_TRUE(c.disable);
  EXPECT_EQ(c.d2h_method, CopyMethod::Memcpy);
  EXPECT_EQ(c.fresh_pages, FreshPages::Populate);
  EXPECT_NE(describe(c).find("CMT_CHUNK_BYTES=1M"), std::string::npos);
  EXPECT_NE(describe(c).find("CMT_FRESH_PAGES=populate"), std::string::npos);
}

TEST(Options, BadValuesKeepDefaultsAndSayWhy) {
  std::map<std::string, std::string> env = {{"CMT_THREADS", "lots"}, {"CMT_CHUNK_BYTES", "12"},
                                            {"CMT_SLOTS", "1"},      {"CMT_DISABLE", "maybe"},
                                            {"CMT_LOG", "loud"},     {"CMT_FRESH_PAGES", "always"}};
  Config c;
  const Config defaults;
  std::vector<std::string> errors;
  apply_environment(c, errors, [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  ASSERT_EQ(errors.size(), 6u);
  EXPECT_EQ(c.threads, defaults.threads);
  EXPECT_EQ(c.chunk_bytes, defaults.chunk_bytes);
  EXPECT_EQ(c.slots, defaults.slots);
  EXPECT_FALSE(c.disable);
  EXPECT_EQ(c.log_level, "warn");
  EXPECT_EQ(c.fresh_pages, FreshPages::Huge);
  EXPECT_NE(errors[0].find("CMT_DISABLE='maybe'"), std::string::npos) << errors[0];
  bool named_threads = false;
  for (const auto& e : errors)
    if (e.find("CMT_THREADS='lots'") != std::string::npos &&
        e.find("expected an integer from 0 to 256") != std::string::npos)
      named_threads = true;
  EXPECT_TRUE(named_threads);
  bool named_fresh = false;
  for (const auto& e : errors)
    named_fresh |= e.find("CMT_FRESH_PAGES='always'") != std::string::npos &&
                   e.find("one of huge, populate, off") != std::string::npos;
  EXPECT_TRUE(named_fresh);
}

// Defaults are written once, as the Config initializers; each row prints its own, and that text
// parses back to the same value.
TEST(OptionTable, EachDefaultIsTheConfigInitializerAndReadsBack) {
  const Config defaults;
  for (const OptionSpec& row : option_table()) {
    Config c;
    EXPECT_EQ(row.apply(c, row.default_text()), "") << row.name;
    EXPECT_EQ(row.show(c), row.show(defaults)) << row.name;
  }
  EXPECT_EQ(find_option("chunk_bytes")->default_text(), "2M");
  EXPECT_EQ(find_option("fresh_pages")->default_text(), "huge");
  EXPECT_EQ(find_option("stats_file")->default_text(), "");
}

TEST(OptionTable, NamesAndVariablesAreUniqueAndEveryRowIsDocumented) {
  std::set<std::string> names, envs;
  for (const OptionSpec& row : option_table()) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    EXPECT_TRUE(envs.insert(row.env).second) << row.env;
    EXPECT_EQ(std::string(row.env).rfind("CMT_", 0), 0u) << row.env;
    EXPECT_GT(std::string(row.help).size(), 20u) << row.name;
    EXPECT_FALSE(row.tuned && row.scope == Scope::EnvOnly) << row.name;
  }
}

// The per-GPU and tuned knob lists, the tuned knobs' text and the full search's values follow
// from the table: a knob is listed once, in its row.
TEST(OptionTable, ScopesMakeTheKnobLists) {
  std::vector<std::string> per_gpu, tuned;
  for (const OptionSpec& row : option_table()) {
    if (row.scope == Scope::PerGpu) per_gpu.push_back(row.name);
    if (row.tuned) tuned.push_back(row.name);
  }
  EXPECT_EQ(per_gpu_knobs(), per_gpu);
  EXPECT_EQ(tuned_knobs(), tuned);
  EXPECT_GE(tuned.size(), 6u);
  const Config defaults;
  const std::string text = tuned_knobs_text(defaults), lane_text = tuned_knobs_text(defaults, true);
  for (const OptionSpec& row : option_table()) {
    const std::string named = std::string(row.name) + " " + row.show(defaults);
    const bool lane_knob = row.tuned && row.scope == Scope::PerGpu;
    EXPECT_EQ(text.find(named) != std::string::npos, row.tuned) << row.name << ": " << text;
    EXPECT_EQ(lane_text.find(named) != std::string::npos, lane_knob) << row.name;
    // The full search moves exactly the tuned lane knobs, through values their rows parse.
    EXPECT_EQ(!row.search.empty(), lane_knob) << row.name;
    std::string values = row.search + ",";
    for (std::size_t at = 0, comma;
         !row.search.empty() && (comma = values.find(',', at)) != std::string::npos;
         at = comma + 1) {
      Config c;
      EXPECT_EQ(row.apply(c, values.substr(at, comma - at)), "") << row.name;
    }
  }
  Config a, b;
  b.spin_us = 5;
  b.h2d_method = CopyMethod::Streaming;
  EXPECT_FALSE(same_lane_knobs(a, b));
  copy_lane_knobs(a, b);
  EXPECT_TRUE(same_lane_knobs(a, b));
  EXPECT_EQ(a.spin_us, 5u);
  EXPECT_EQ(a.h2d_method, CopyMethod::Streaming);
  b.threshold = 1;  // a process knob: lanes are alike without it
  EXPECT_TRUE(same_lane_knobs(a, b));
  EXPECT_EQ(scope_text(*find_option("threads")), "per GPU, tuned");
  EXPECT_EQ(scope_text(*find_option("stats_file")), "environment only");
}

// spin_us has a sane bound, named in the message (issue 31, finding 6: a second of spinning
// validated).
TEST(OptionTable, SpinningIsBounded) {
  Config c;
  std::vector<std::string> errors;
  apply_environment(c, errors, [](const char* name) -> const char* {
    return std::string(name) == "CMT_SPIN_US" ? "1000000" : nullptr;
  });
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("CMT_SPIN_US='1000000' is not valid: expected an integer from 0 to "
                           "20000"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(c.spin_us, Config().spin_us);
  EXPECT_EQ(find_option("spin_us")->apply(c, "20000"), "");
  EXPECT_EQ(c.spin_us, 20000u);
}

// A value is quoted cut short, its length said: a 120 KB variable once came back whole in the
// warning (issue 31, finding 10).
TEST(OptionTable, LongValuesAreQuotedShort) {
  const std::string huge(120u << 10, '7');
  Config c;
  std::vector<std::string> errors;
  apply_environment(c, errors, [&](const char* name) -> const char* {
    return std::string(name) == "CMT_SLOTS" ? huge.c_str() : nullptr;
  });
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_LT(errors[0].size(), 300u) << errors[0].substr(0, 300);
  EXPECT_NE(errors[0].find("CMT_SLOTS='" + std::string(64, '7') + "... (122880 bytes)' is not valid"),
            std::string::npos)
      << errors[0].substr(0, 300);
  EXPECT_EQ(quoted_value("a\x1b[31mb"), "a\\x1B[31mb");
  EXPECT_EQ(quoted_value(std::string(64, 'x')), std::string(64, 'x'));
}

TEST(OptionTable, EnvironmentRowsCanBeReadApart) {
  std::map<std::string, std::string> env = {
      {"CMT_THREADS", "6"}, {"CMT_PROFILE", "/p.toml"}, {"CMT_CONFIGS_DIR", ""}};
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  Config c;
  std::vector<std::string> errors;
  apply_environment(c, errors, get, EnvRows::EnvOnly);
  EXPECT_EQ(c.threads, 0u);
  EXPECT_EQ(c.profile, "/p.toml");
  ASSERT_TRUE(c.configs_dir.has_value());  // set but empty: no shared profiles
  EXPECT_EQ(*c.configs_dir, "");
  apply_environment(c, errors, get, EnvRows::Knobs);
  EXPECT_EQ(c.threads, 6u);
  EXPECT_TRUE(errors.empty());
}

// A bad value is echoed with control and non-ASCII bytes escaped: it reaches a terminal.
TEST(Options, BadValuesAreEchoedPrintably) {
  Config c;
  std::vector<std::string> errors;
  apply_environment(c, errors, [](const char* name) -> const char* {
    return std::string(name) == "CMT_LOG" ? "loud\x1b[31m\xff" : nullptr;
  });
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("CMT_LOG='loud\\x1B[31m\\xFF' is not valid"), std::string::npos)
      << errors[0];
}

TEST(GpuLocality, ParsesCpuLists) {
  std::vector<int> cpus;
  ASSERT_TRUE(parse_cpu_list("0-3,8,10-11\n", &cpus));
  EXPECT_EQ(cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_FALSE(parse_cpu_list("3-1", &cpus));
  EXPECT_FALSE(parse_cpu_list("a-b", &cpus));
  EXPECT_FALSE(parse_cpu_list("1x", &cpus));
  EXPECT_FALSE(gpu_locality("").cpus.empty());
  EXPECT_FALSE(gpu_locality("0000:ff:1f.7").cpus.empty());  // no such device: all allowed cores
}

// Two hyperthreads per core, siblings n and n + 8 (as Linux numbers them on many machines):
// shares are whole cores, contiguous, as even as the cores allow.
TEST(GpuLocality, SplitsWholeCoresIntoEvenShares) {
  std::vector<int> cpus, core_of;
  for (int c = 0; c < 16; ++c) {
    cpus.push_back(c);
    core_of.push_back(c % 8);
  }
  EXPECT_EQ(split_cores(cpus, core_of, 2, 0), (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(split_cores(cpus, core_of, 2, 1), (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  // Three shares of 8 cores: 2, 3 and 3 cores, every CPU in exactly one.
  std::vector<int> all;
  for (std::size_t k = 0; k < 3; ++k) {
    const std::vector<int> share = split_cores(cpus, core_of, 3, k);
    EXPECT_GE(share.size(), 4u);
    all.insert(all.end(), share.begin(), share.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, cpus);
  // Shares under four CPUs: nobody splits, so the GPUs' choices agree.
  EXPECT_EQ(split_cores(cpus, core_of, 5, 0), cpus);
  EXPECT_EQ(split_cores(cpus, core_of, 1, 0), cpus);
  EXPECT_EQ(split_cores(cpus, core_of, 2, 2), cpus);  // no such share
  EXPECT_EQ(split_cores(cpus, {0, 1}, 2, 0), cpus);   // core_of does not match
}

// A fake /sys: three NVIDIA GPUs, two on node 0's CPUs 0-15 (two threads per core, siblings
// adjacent) and one on node 1's, a bridge from NVIDIA that is no GPU on node 0.
class FakeSys {
 public:
  FakeSys() {
    root_ = temp_dir();
    gpu("0000:1b:00.0", "0x030200", "0-15", "0");
    gpu("0000:43:00.0", "0x030000", "0-15", "0");
    gpu("0000:9a:00.0", "0x030200", "16-31", "1");
    gpu("0000:00:01.0", "0x060400", "0-15", "0");
    for (int c = 0; c < 32; ++c)
      write_file(
          root_ + "/devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list",
          std::to_string(c & ~1) + "-" + std::to_string(c | 1) + "\n");
  }
  ~FakeSys() { remove_tree(root_); }
  const std::string& root() const { return root_; }

 private:
  void gpu(const std::string& bus, const std::string& pci_class, const std::string& cpus,
           const std::string& node) {
    const std::string dir = root_ + "/bus/pci/devices/" + bus + "/";
    write_file(dir + "vendor", "0x10de\n");
    write_file(dir + "class", pci_class + "\n");
    write_file(dir + "local_cpulist", cpus + "\n");
    write_file(dir + "numa_node", node + "\n");
  }
  std::string root_;
};

std::vector<int> range(int lo, int hi) {
  std::vector<int> out;
  for (int c = lo; c <= hi; ++c) out.push_back(c);
  return out;
}

TEST(GpuLocality, FindsTheGpusOnTheSameCores) {
  FakeSys sys;
  EXPECT_EQ(gpus_on_cores(sys.root(), range(0, 15)),
            (std::vector<std::string>{"0000:1b:00.0", "0000:43:00.0"}));
  EXPECT_EQ(gpus_on_cores(sys.root(), range(16, 31)), (std::vector<std::string>{"0000:9a:00.0"}));
  EXPECT_TRUE(gpus_on_cores(sys.root(), range(0, 7)).empty());
}

TEST(GpuLocality, SplitGivesEachGpuOfANodeItsOwnCores) {
  FakeSys sys;
  const std::vector<int> allowed = range(0, 31);
  const GpuLocality first = gpu_locality("0000:1B:00.0", GpuCores::Split, sys.root(), allowed);
  const GpuLocality second = gpu_locality("0000:43:00.0", GpuCores::Split, sys.root(), allowed);
  EXPECT_EQ(first.numa_node, 0);
  EXPECT_EQ(first.cpus, range(0, 7));
  EXPECT_EQ(second.cpus, range(8, 15));
  // Alone on its node: all of its cores. Shared, by default: all of them too.
  EXPECT_EQ(gpu_locality("0000:9a:00.0", GpuCores::Split, sys.root(), allowed).cpus, range(16, 31));
  EXPECT_EQ(gpu_locality("0000:43:00.0", GpuCores::All, sys.root(), allowed).cpus, range(0, 15));
  // Only the cores this process may use are split: CPUs 4-11, four each.
  const std::vector<int> some = range(4, 11);
  EXPECT_EQ(gpu_locality("0000:1b:00.0", GpuCores::Split, sys.root(), some).cpus, range(4, 7));
  EXPECT_EQ(gpu_locality("0000:43:00.0", GpuCores::Split, sys.root(), some).cpus, range(8, 11));
  // Shares of two and four CPUs: too few for one, so neither splits and both keep all six.
  EXPECT_EQ(gpu_locality("0000:43:00.0", GpuCores::Split, sys.root(), range(4, 9)).cpus,
            range(4, 9));
}

TEST(Options, GpuCoresTakesAllOrSplit) {
  Config c;
  std::vector<std::string> errors;
  apply_environment(c, errors, [](const char* name) -> const char* {
    return std::string(name) == "CMT_GPU_CORES" ? "split" : nullptr;
  });
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(c.gpu_cores, GpuCores::Split);
  Config d;
  apply_environment(d, errors, [](const char* name) -> const char* {
    return std::string(name) == "CMT_GPU_CORES" ? "half" : nullptr;
  });
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("CMT_GPU_CORES='half'"), std::string::npos) << errors[0];
  EXPECT_EQ(d.gpu_cores, GpuCores::All);
}

// Log lines are formatted in log.cpp from their arguments' values; a format that does not fit its
// arguments is written as it stands, and lines under the level are not written at all.
TEST(Log, FormatsEachKindOfArgument) {
  set_log_level("info");
  int x = 0;
  testing::internal::CaptureStderr();
  CMT_LOG(info, "a {} b {} c {} d {} e {} f {}", -1, std::size_t{2}, std::string("text"), true, 1.5,
          "chars");
  CMT_LOG(debug, "not written {}", 3);
  CMT_LOG(warn, "one {} two {}", 1);
  CMT_LOG(info, "{}", static_cast<const void*>(&x));
  const std::string out = testing::internal::GetCapturedStderr();
  set_log_level("warn");
  EXPECT_NE(out.find("[cmt] [info] a -1 b 2 c text d true e 1.5 f chars\n"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("not written"), std::string::npos) << out;
  EXPECT_NE(out.find("[cmt] [warning] one {} two {}\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[cmt] [info] 0x"), std::string::npos) << out;
  EXPECT_FALSE(log_enabled(LogLevel::info));
  EXPECT_TRUE(log_enabled(LogLevel::warn));
}

}  // namespace
}  // namespace cmt
