// Profiles: what is applied, what each bad input says (file, line, column, key, expectation),
// precedence under the environment, and a fuzz run of the loader over random and mutated text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <random>
#include <string>

#include "profile.h"

namespace cmt {
namespace {

const char* const kGood = R"(schema = 1
cmt_version = "0.1.0"

[machine]
cpu = "Intel(R) Xeon(R) Processor"
cores = 16
gpus = ["NVIDIA H200"]

[cmt]
threads = 6
chunk_bytes = "1M"
slots = 24
threshold = 4194304
disable = false
d2h_method = "streaming"

[measured]
h2d_1g_gbps = 50.2
)";

bool mentions(const std::vector<std::string>& messages, const std::string& text) {
  for (const auto& m : messages)
    if (m.find(text) != std::string::npos) return true;
  return false;
}

TEST(Profile, AppliesKnobsAndRecordsWhereTheyCameFrom) {
  Config c;
  ProfileReport r = load_profile_text(kGood, "good.toml", c);
  ASSERT_TRUE(r.ok()) << r.errors[0];
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(c.threads, 6u);
  EXPECT_EQ(c.chunk_bytes, 1u << 20);
  EXPECT_EQ(c.slots, 24u);
  EXPECT_EQ(c.threshold, 4u << 20);
  EXPECT_EQ(c.d2h_method, CopyMethod::Streaming);
  EXPECT_EQ(c.origin["threads"], "profile good.toml");
  EXPECT_EQ(c.origin.count("spin_us"), 0u);
}

TEST(Profile, MalformedTomlNamesFileLineAndColumn) {
  Config c;
  ProfileReport r = load_profile_text("schema = 1\n[cmt\nthreads = 2\n", "broken.toml", c);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.errors, "broken.toml:2:")) << r.errors[0];
  EXPECT_TRUE(mentions(r.errors, "not valid TOML"));
}

TEST(Profile, UnknownKeysWarnAndSuggestTheNearestKnownOne) {
  Config c;
  ProfileReport r =
      load_profile_text("schema = 1\n[cmt]\nthread = 4\nslots = 8\n[extra]\n", "p.toml", c);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(mentions(r.warnings,
                       "p.toml:3:10: unknown key 'cmt.thread' is ignored (did you "
                       "mean 'threads'?)"))
      << r.warnings[0];
  EXPECT_TRUE(mentions(r.warnings, "unknown top-level key 'extra'"));
  EXPECT_EQ(c.slots, 8u);
  EXPECT_EQ(nearest_option("chunkbytes"), "chunk_bytes");
  EXPECT_EQ(nearest_option("completely_different"), "");
}

TEST(Profile, BadValuesAreErrorsAndNothingIsApplied) {
  Config c;
  const Config defaults;
  ProfileReport r = load_profile_text(
      "schema = 1\n[cmt]\nslots = 4\nthreads = 9999\nchunk_bytes = 1.5\nlog = \"loud\"\n",
      "bad.toml", c);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.errors,
                       "bad.toml:4:11: key 'cmt.threads' = '9999' is not valid: "
                       "expected an integer from 0 to 256"));
  EXPECT_TRUE(mentions(r.errors, "bad.toml:5:15: key 'cmt.chunk_bytes' must be a string"));
  EXPECT_TRUE(mentions(r.errors, "key 'cmt.log' = 'loud'"));
  EXPECT_EQ(c.slots, defaults.slots);  // all or nothing: the good key was not applied either
}

TEST(Profile, SchemaMustBeThisVersion) {
  Config c;
  EXPECT_TRUE(mentions(load_profile_text("[cmt]\nslots = 4\n", "a.toml", c).errors,
                       "a.toml: no 'schema' key; expected schema = 1"));
  EXPECT_TRUE(mentions(load_profile_text("schema = 2\n", "b.toml", c).errors,
                       "b.toml:1:10: schema '2' is not supported; this cmt reads schema 1"));
  EXPECT_TRUE(mentions(load_profile_text("schema = \"one\"\n", "c.toml", c).errors,
                       "schema 'one' is not supported"));
  EXPECT_TRUE(mentions(load_profile_text("schema = 1\ncmt = 3\n", "d.toml", c).errors,
                       "d.toml:2:7: 'cmt' must be a table"));
}

TEST(Profile, MissingFileIsAnError) {
  Config c;
  EXPECT_TRUE(mentions(load_profile_file("/nonexistent/cmt.toml", c).errors,
                       "/nonexistent/cmt.toml: cannot open the profile"));
}

TEST(Profile, EnvironmentWinsOverTheProfile) {
  char path[] = "/tmp/cmt_profile_testXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = kGood;
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  std::map<std::string, std::string> env = {{"CMT_SLOTS", "40"}, {"CMT_THREADS", "x"}};
  LoadedConfiguration loaded = load_configuration(path, [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  unlink(path);
  EXPECT_TRUE(loaded.profile.ok());
  EXPECT_EQ(loaded.config.slots, 40u);  // environment
  EXPECT_EQ(loaded.config.origin["slots"], "env CMT_SLOTS");
  EXPECT_EQ(loaded.config.threads, 6u);            // bad variable: the profile's value stays
  EXPECT_EQ(loaded.config.chunk_bytes, 1u << 20);  // profile
  ASSERT_EQ(loaded.env_errors.size(), 1u);
  EXPECT_TRUE(mentions(loaded.env_errors, "CMT_THREADS='x'"));
}

// A few thousand random and mutated profiles: the loader must answer each with a report, never a
// crash, a hang or an exception.
TEST(ProfileFuzz, RandomAndMutatedInputs) {
  std::mt19937 rng(20261129);
  const std::string seed = kGood;
  const std::string tokens[] = {"[",
                                "]",
                                "=",
                                "\"",
                                "'",
                                "\n",
                                "[[cmt]]",
                                "schema",
                                "threads",
                                "1e999",
                                "-1",
                                "0x10",
                                "\\u0000",
                                "#",
                                "{",
                                "}",
                                ",",
                                "inf",
                                "nan",
                                "1979-05-27T07:32:00Z",
                                "\"\"\"",
                                "[cmt.sub]",
                                "9999999999999999999999"};
  int applied = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = seed;
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      std::size_t pos = text.empty() ? 0 : rng() % text.size();
      switch (rng() % 5) {
        case 0:
          if (!text.empty()) text[pos] = static_cast<char>(rng());
          break;
        case 1:
          text.insert(pos, tokens[rng() % (sizeof(tokens) / sizeof(tokens[0]))]);
          break;
        case 2:
          text.erase(pos, rng() % 16);
          break;
        case 3:
          text = text.substr(0, pos);
          break;
        default:
          text.insert(pos, 1, static_cast<char>(rng() % 128));
          break;
      }
    }
    if (i % 10 == 0) {  // also wholly random bytes
      text.resize(rng() % 300);
      for (char& ch : text) ch = static_cast<char>(rng());
    }
    Config c;
    ProfileReport r = load_profile_text(text, "fuzz.toml", c);
    if (r.ok()) ++applied;
    for (const auto& m : r.errors) ASSERT_FALSE(m.empty());
  }
  EXPECT_GT(applied, 0);  // some mutations stay valid
}

}  // namespace
}  // namespace cmt
