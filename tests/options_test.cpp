// The option table: sizes with suffixes, ranges, and bad values that name the variable, the value
// and what was expected while the default stays in force.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "config/options.h"
#include "engine/gpu_locality.h"

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

// The per-GPU and tuned knob lists, and what makes two lanes alike, follow from the table.
TEST(OptionTable, ScopesMakeTheKnobLists) {
  EXPECT_EQ(per_gpu_knobs(),
            (std::vector<std::string>{"threads", "chunk_bytes", "d2h_chunk_bytes", "slots",
                                      "spin_us", "ramp", "h2d_method", "d2h_method"}));
  EXPECT_EQ(tuned_knobs(),
            (std::vector<std::string>{"threads", "chunk_bytes", "d2h_chunk_bytes", "slots",
                                      "lanes", "threshold", "d2h_threshold", "warm_threshold",
                                      "d2h_warm_threshold", "h2d_method", "d2h_method",
                                      "host_copy_threshold", "host_fill_threshold"}));
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

}  // namespace
}  // namespace cmt
