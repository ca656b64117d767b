// Profiles: what is applied, what each bad input says (file, line, column, key, expectation),
// precedence under the environment, and a fuzz run of the loader over random and mutated text.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "config/profile.h"
#include "temp_files.h"

namespace cmt {
namespace {

const char* const kGood = R"(schema = 1
cmt_version = "0.1.0"

[machine]
cpu = "Intel(R) Xeon(R) Processor"
cpus = 16
gpus = ["10de:2335"]
driver = "580.159.04"

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
  EXPECT_TRUE(mentions(load_profile_text("schema = \"1\"\n", "c.toml", c).errors,
                       "c.toml:1:10: schema must be an integer: write schema = 1, without quotes"));
  EXPECT_TRUE(mentions(load_profile_text("schema = 1\ncmt = 3\n", "d.toml", c).errors,
                       "d.toml:2:7: 'cmt' must be a table"));
}

TEST(Profile, MissingFileIsAnError) {
  Config c;
  EXPECT_TRUE(
      mentions(load_profile_file("/nonexistent/cmt.toml", c).errors,
               "/nonexistent/cmt.toml: cannot read the profile: No such file or directory"));
}

TEST(Profile, EnvironmentWinsOverTheProfile) {
  char path[] = "/tmp/cmt_profile_testXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = kGood;
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  std::map<std::string, std::string> env = {{"CMT_SLOTS", "40"}, {"CMT_THREADS", "x"}};
  MachineFingerprint here;  // the profile's machine
  here.cpu_model = "Intel(R) Xeon(R) Processor";
  here.cpus = 16;
  here.gpus = {"10de:2335"};
  LoadedConfiguration loaded = load_configuration(path, here, [&](const char* n) -> const char* {
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

// Points XDG_CONFIG_HOME (where this user's profiles live) at `dir` for the test's duration.
class ScopedConfigHome {
 public:
  explicit ScopedConfigHome(const std::string& dir) {
    const char* old = std::getenv("XDG_CONFIG_HOME");
    had_ = old != nullptr;
    if (old) saved_ = old;
    setenv("XDG_CONFIG_HOME", dir.c_str(), 1);
  }
  ~ScopedConfigHome() {
    if (had_)
      setenv("XDG_CONFIG_HOME", saved_.c_str(), 1);
    else
      unsetenv("XDG_CONFIG_HOME");
  }

 private:
  bool had_ = false;
  std::string saved_;
};

TEST(Fingerprint, ReadsCpuGpusLinkAndDriverFromProcAndSys) {
  std::string root = temp_dir();
  write_file(root + "/proc/cpuinfo",
             "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz\n\n"
             "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz\n");
  const std::string gpu = root + "/sys/bus/pci/devices/0000:1b:00.0/";
  write_file(gpu + "vendor", "0x10de\n");
  write_file(gpu + "device", "0x2335\n");
  write_file(gpu + "class", "0x030200\n");
  write_file(gpu + "current_link_speed", "32.0 GT/s PCIe\n");
  write_file(gpu + "current_link_width", "16\n");
  const std::string nic = root + "/sys/bus/pci/devices/0000:00:01.0/";
  write_file(nic + "vendor", "0x10de\n");  // NVIDIA, but a bridge: not a GPU
  write_file(nic + "class", "0x060400\n");
  write_file(root + "/sys/module/nvidia/version", "580.159.04\n");
  MachineFingerprint m = read_fingerprint(root);
  EXPECT_EQ(m.cpu_model, "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz");
  EXPECT_EQ(m.cpus, 2);
  EXPECT_EQ(m.gpus, (std::vector<std::string>{"10de:2335"}));
  EXPECT_EQ(m.pcie, "32.0 GT/s PCIe x16");
  EXPECT_EQ(m.driver, "580.159.04");
  const std::string key = m.key();
  EXPECT_EQ(key.rfind("intel-xeon-platinum-8480-2cpu-2335x1-", 0), 0u) << key;
  MachineFingerprint other = m;
  other.gpus.push_back("10de:2335");
  EXPECT_NE(other.key(), key);
  other = m;
  other.driver = "999";  // not part of the identity
  EXPECT_EQ(other.key(), key);
  remove_tree(root);
}

TEST(Profile, AProfileFromAnotherMachineIsRefusedAndNamesTheDifference) {
  MachineFingerprint here;
  here.cpu_model = "CPU A";
  here.cpus = 16;
  here.gpus = {"10de:2335"};
  here.driver = "580";
  here.pcie = "32.0 GT/s PCIe x16";
  Config c;
  ProfileReport r = load_profile_text(
      "schema = 1\n[machine]\ncpu = \"CPU B\"\ncpus = 16\ngpus = [\"10de:2335\", \"10de:2335\"]\n"
      "[cmt]\nslots = 4\n",
      "other.toml", c, &here);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.errors,
                       "other.toml: tuned on another machine: CPU 'CPU B' (here 'CPU A'); "
                       "GPUs [10de:2335, 10de:2335] (here [10de:2335])"))
      << r.errors[0];
  EXPECT_EQ(c.slots, Config().slots);
  r = load_profile_text(
      "schema = 1\n[machine]\ncpu = \"CPU A\"\ncpus = 16\ngpus = [\"10de:2335\"]\n"
      "driver = \"570\"\n[cmt]\nslots = 4\n",
      "same.toml", c, &here);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(mentions(r.warnings, "same.toml: tuned with driver 570, this machine has 580"));
  EXPECT_EQ(c.slots, 4u);
}

TEST(Profile, TheUsersProfileForThisMachineSitsUnderExplicitOnesAndTheEnvironment) {
  std::string home = temp_dir();
  ScopedConfigHome config_home(home);
  MachineFingerprint here;
  here.cpu_model = "CPU A";
  here.cpus = 8;
  const std::string mine = user_profile_path(here);
  EXPECT_EQ(mine, home + "/cmt/profiles/" + here.key() + ".toml");
  write_file(mine,
             "schema = 1\n[machine]\ncpu = \"CPU A\"\ncpus = 8\ngpus = []\n"
             "[cmt]\nslots = 20\nthreads = 3\nthreshold = \"8M\"\n");
  write_file(home + "/explicit.toml", "schema = 1\n[cmt]\nthreads = 5\n");
  auto env = [](const char* n) -> const char* {
    return std::string(n) == "CMT_THRESHOLD" ? "1M" : nullptr;
  };
  LoadedConfiguration loaded = load_configuration(home + "/explicit.toml", here, env);
  EXPECT_TRUE(loaded.profile.ok());
  EXPECT_EQ(loaded.machine_profile, mine);
  EXPECT_EQ(loaded.config.slots, 20u);  // this machine's profile
  EXPECT_EQ(loaded.config.origin["slots"], "profile " + mine);
  EXPECT_EQ(loaded.config.threads, 5u);          // the explicit profile wins over it
  EXPECT_EQ(loaded.config.threshold, 1u << 20);  // the environment wins over both
  remove_tree(home);
}

// Where output goes and which files are read never come from a profile: profiles arrive by pull
// request, and a shared one applies to every matching program.
TEST(Profile, EnvironmentOnlyOptionsAreIgnoredInProfilesWithAReason) {
  Config c;
  ProfileReport r = load_profile_text(
      "schema = 1\n[cmt]\nstats_file = \"x\"\nprofile = \"/etc/other.toml\"\nthreads = 3\n",
      "p.toml", c);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(mentions(r.warnings,
                       "p.toml:3:14: 'cmt.stats_file' is ignored: only the "
                       "environment sets it (CMT_STATS)"))
      << r.warnings[0];
  EXPECT_TRUE(mentions(r.warnings, "'cmt.profile' is ignored"));
  EXPECT_EQ(c.stats_file, "");
  EXPECT_EQ(c.profile, "");
  EXPECT_EQ(c.threads, 3u);
  EXPECT_EQ(nearest_option("stats_fil"), "");  // no hint toward a key a profile may not set
}

TEST(Profile, CmtProfileIsReadThroughTheOptionTable) {
  std::string home = temp_dir();
  ScopedConfigHome config_home(home);
  write_file(home + "/named.toml", "schema = 1\n[cmt]\nslots = 6\n");
  const std::string named = home + "/named.toml";
  auto env = [&](const char* n) -> const char* {
    const std::string name = n;
    if (name == "CMT_PROFILE") return named.c_str();
    if (name == "CMT_CONFIGS_DIR") return "";
    return nullptr;
  };
  MachineFingerprint here;
  LoadedConfiguration loaded = load_configuration("", here, env);
  EXPECT_TRUE(loaded.profile.ok());
  EXPECT_EQ(loaded.config.slots, 6u);
  EXPECT_EQ(loaded.config.profile, named);
  EXPECT_EQ(loaded.config.origin["slots"], "profile " + named);
  remove_tree(home);
}

// Only regular files of at most 1 MiB are read: anything else is refused without blocking or
// growing, with the reason.
TEST(Profile, OnlyRegularFilesOfBoundedSizeAreRead) {
  const std::string dir = temp_dir();
  const std::string fifo = dir + "/fifo.toml", big = dir + "/big.toml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  write_file(big, "schema = 1\n#" + std::string(kMaxProfileBytes, 'x') + "\n");
  write_file(dir + "/ok.toml", "schema = 1\n[cmt]\nslots = 5\n");
  struct Case {
    std::string path, says;
  };
  for (const Case& c :
       {Case{fifo, "is a FIFO, not a regular file"}, Case{"/dev/zero", "is a device"},
        Case{dir, "is a directory, not a profile"},
        Case{big,
             "is " + std::to_string(kMaxProfileBytes + 13) + " bytes; a profile is at most 1 MiB"},
        Case{dir + "/missing.toml", "No such file or directory"}}) {
    Config config;
    const auto t0 = std::chrono::steady_clock::now();
    ProfileReport r = load_profile_file(c.path, config);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << c.path;
    ASSERT_FALSE(r.ok()) << c.path;
    EXPECT_TRUE(mentions(r.errors, c.path + ": cannot read the profile: " + c.says)) << r.errors[0];
    EXPECT_EQ(config.slots, Config().slots);
  }
  Config c;
  EXPECT_TRUE(load_profile_file(dir + "/ok.toml", c).ok());
  EXPECT_EQ(c.slots, 5u);
  remove_tree(dir);
}

// [gpu."BUS"] tables: lane knobs per GPU, checked like the rest, with file:line:column.
TEST(Profile, PerGpuKnobs) {
  Config c;
  ProfileReport r = load_profile_text(
      "schema = 1\n[cmt]\nthreads = 8\n[gpu.\"0000:1B:00.0\"]\nthreads = 12\nchunk_bytes = \"4M\"\n"
      "[gpu.\"0000:3d:00.0\"]\nslots = 6\nthreshold = \"1M\"\n",
      "gpus.toml", c);
  ASSERT_TRUE(r.ok()) << r.errors[0];
  EXPECT_EQ(c.threads, 8u);
  EXPECT_EQ(c.per_gpu["0000:1b:00.0"]["threads"], "12");
  EXPECT_EQ(c.per_gpu["0000:1b:00.0"]["chunk_bytes"], "4M");
  EXPECT_EQ(c.per_gpu["0000:3d:00.0"]["slots"], "6");
  EXPECT_TRUE(mentions(r.warnings,
                       "gpus.toml:9:13: 'gpu.0000:3d:00.0.threshold' is ignored: per GPU, only"))
      << r.warnings[0];
  Config one = config_for_gpu(c, "0000:1B:00.0");
  EXPECT_EQ(one.threads, 12u);
  EXPECT_EQ(one.chunk_bytes, 4u << 20);
  EXPECT_EQ(config_for_gpu(c, "0000:99:00.0").threads, 8u);
  EXPECT_NE(describe(c).find("GPU 0000:1b:00.0: chunk_bytes=4M threads=12  (profile gpus.toml)"),
            std::string::npos)
      << describe(c);

  Config bad;
  r = load_profile_text("schema = 1\n[gpu.\"0000:1b:00.0\"]\nslots = 1\n", "bad.toml", bad);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.errors, "bad.toml:3:9: key 'gpu.0000:1b:00.0.slots' = '1' is not valid"))
      << r.errors[0];
  r = load_profile_text("schema = 1\n[gpu.first]\nslots = 4\n", "bad.toml", bad);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.errors, "'gpu.first' must be a table named by a PCI bus id"))
      << r.errors[0];
  r = load_profile_text("schema = 1\ngpu = 3\n", "bad.toml", bad);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(mentions(r.errors, "bad.toml:2:7: 'gpu' must be a table of tables")) << r.errors[0];
  EXPECT_TRUE(bad.per_gpu.empty());
}

// configs/: with no profile of the user's own, the shared one for this exact machine is used,
// else one for the same CPU and GPU models (another CPU count is fine there); never one for
// other hardware, and never over the user's own.
TEST(Profile, SharedProfilesFromConfigsWhenTheUserHasNone) {
  std::string home = temp_dir(), shared = temp_dir();
  ScopedConfigHome config_home(home);
  MachineFingerprint here;
  here.cpu_model = "CPU A";
  here.cpus = 8;
  here.gpus = {"10de:2335"};
  std::string dir = shared;
  auto env = [&dir](const char* n) -> const char* {
    return std::string(n) == "CMT_CONFIGS_DIR" ? dir.c_str() : nullptr;
  };
  write_file(shared + "/README.md", "shared profiles\n");
  write_file(shared + "/a-other-gpu.toml",
             "schema = 1\n[machine]\ncpu = \"CPU A\"\ncpus = 8\ngpus = [\"10de:2330\"]\n"
             "[cmt]\nslots = 5\n");
  write_file(shared + "/b-same-models.toml",
             "schema = 1\n[machine]\ncpu = \"CPU A\"\ncpus = 64\ngpus = [\"10de:2335\"]\n"
             "driver = \"999\"\n[cmt]\nslots = 6\n");
  LoadedConfiguration loaded = load_configuration("", here, env);
  EXPECT_EQ(loaded.shared_profile, shared + "/b-same-models.toml");
  EXPECT_EQ(loaded.shared_match, "same CPU and GPU models");
  EXPECT_EQ(loaded.config.slots, 6u);
  EXPECT_TRUE(loaded.profile.warnings.empty());  // another driver is expected of a shared profile

  write_file(shared + "/" + here.key() + ".toml",
             "schema = 1\n[machine]\ncpu = \"CPU A\"\ncpus = 8\ngpus = [\"10de:2335\"]\n"
             "[cmt]\nslots = 7\n");
  loaded = load_configuration("", here, env);
  EXPECT_EQ(loaded.shared_match, "exact machine");
  EXPECT_EQ(loaded.config.slots, 7u);

  write_file(user_profile_path(here), "schema = 1\n[cmt]\nslots = 8\n");
  loaded = load_configuration("", here, env);
  EXPECT_TRUE(loaded.shared_profile.empty());
  EXPECT_EQ(loaded.config.slots, 8u);

  // Other hardware only: nothing shared applies.
  std::system(("rm -rf '" + home + "'/cmt '" + shared + "'/*.toml").c_str());
  write_file(shared + "/a-other-gpu.toml",
             "schema = 1\n[machine]\ncpu = \"CPU A\"\ncpus = 8\ngpus = [\"10de:2330\"]\n"
             "[cmt]\nslots = 5\n");
  loaded = load_configuration("", here, env);
  EXPECT_TRUE(loaded.shared_profile.empty());
  EXPECT_EQ(loaded.config.slots, Config().slots);
  std::system(("rm -rf '" + home + "' '" + shared + "'").c_str());
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
                                "9999999999999999999999",
                                "\xEF\xAC\xB6",
                                "\xEF\xBB\xBE"};
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

// toml++ 3.3 runs into undefined behaviour on some non-ASCII characters (U+FB36-U+FEFE): profiles
// are ASCII, and anything else is refused before parsing, saying where.
TEST(ProfileFuzz, NonAsciiIsRefusedBeforeParsing) {
  for (const char* ch : {"\xEF\xAC\xB6", "\xEF\xBB\xBE", "\xEF\xBB\xBF", "\xC3\xA9", "\x80"})
    for (const char* where : {"key", "string", "comment", "table"}) {
      const std::string w = where, c = ch;
      const std::string text = w == "key"       ? "schema = 1\n[cmt]\nthr" + c + "ads = 6\n"
                               : w == "string"  ? "schema = 1\n[cmt]\nchunk_bytes = \"" + c + "\"\n"
                               : w == "comment" ? "schema = 1\n# " + c + "\n[cmt]\nthreads = 6\n"
                                                : "schema = 1\n[cmt" + c + "]\n";
      Config config;
      ProfileReport r = load_profile_text(text, "u.toml", config);
      ASSERT_FALSE(r.ok()) << where;
      EXPECT_NE(r.errors[0].find("u.toml:"), std::string::npos) << r.errors[0];
      EXPECT_NE(r.errors[0].find("is not ASCII; profiles are ASCII"), std::string::npos)
          << r.errors[0];
      EXPECT_EQ(config.threads, Config().threads);
    }
  EXPECT_EQ(profile_text_error("schema = 1\n# ok\n", "a.toml"), "");
  EXPECT_EQ(profile_text_error("schema = 1\nx = \"\xC3\xA9\"\n", "a.toml"),
            "a.toml:2:6: byte 0xC3 is not ASCII; profiles are ASCII");
}

// Deep nesting is refused before the parser sees it: the library parses on the thread of the
// first CUDA call, and arrays 250 deep overflowed a 256 KiB stack there (issue 31, finding 4).
// Run on such a thread, as a program's worker may be.
TEST(ProfileLimits, DeepNestingIsRefusedBeforeParsingOnASmallStack) {
  const std::string deep =
      "schema = 1\n[cmt]\nx = " + std::string(250, '[') + std::string(250, ']') + "\n";
  struct Run {
    std::string text;
    ProfileReport report;
  } run{deep, {}};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256u << 10);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* p) -> void* {
                  auto* r = static_cast<Run*>(p);
                  Config c;
                  r->report = load_profile_text(r->text, "deep.toml", c);
                  return nullptr;
                },
                &run),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  ASSERT_FALSE(run.report.ok());
  EXPECT_EQ(run.report.errors[0],
            "deep.toml:3:13: nested more than 8 deep (arrays and tables); a profile needs 2");
  // What profiles hold stays within it: table headers, arrays of tables, inline tables, and
  // brackets inside strings and comments do not count.
  Config c;
  EXPECT_TRUE(load_profile_text("schema = 1\n[cmt]\nthreads = 6\n[[measured.copies]]\n"
                                "x = [[1, 2], {a = [3]}]\ns = \"[[[[[[[[[[\"\n# [[[[[[[[[[\n",
                                "ok.toml", c)
                  .ok());
  EXPECT_EQ(profile_text_error("x = " + std::string(8, '[') + std::string(8, ']'), "n"), "");
  EXPECT_NE(profile_text_error("x = " + std::string(9, '[') + std::string(9, ']'), "n"), "");
}

// Copy threads past this process's cores are capped where the configuration is loaded, each cap
// said, naming where the value came from (issue 31, finding 6).
TEST(ProfileLimits, ThreadsPastTheCoresAreCapped) {
  Config c;
  c.threads = 256;
  c.origin["threads"] = "env CMT_THREADS";
  c.per_gpu["0000:1b:00.0"] = {{"threads", "64"}, {"slots", "5"}};
  c.per_gpu["0000:3b:00.0"] = {{"threads", "3"}};
  std::vector<std::string> warnings;
  cap_threads(c, 4, &warnings);
  EXPECT_EQ(c.threads, 4u);
  EXPECT_EQ(c.per_gpu["0000:1b:00.0"]["threads"], "4");
  EXPECT_EQ(c.per_gpu["0000:1b:00.0"]["slots"], "5");
  EXPECT_EQ(c.per_gpu["0000:3b:00.0"]["threads"], "3");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0],
            "threads (env CMT_THREADS) = 256 is more than the 4 cores this process may run on; "
            "using 4");
  EXPECT_EQ(warnings[1],
            "gpu.0000:1b:00.0.threads = 64 is more than the 4 cores this process may run on; "
            "using 4");
  // Within the cores: nothing to say.
  Config fits;
  fits.threads = 2;
  warnings.clear();
  cap_threads(fits, 2, &warnings);
  EXPECT_EQ(fits.threads, 2u);
  EXPECT_TRUE(warnings.empty());
}

// Inputs that once tripped toml++'s internal assertions (an abort in debug builds).
TEST(ProfileFuzz, KnownParserTraps) {
  for (const char* text : {"[#cmt]\n", "schema = 1\n[#cmt]\nthreads = 6\n", "[ #x]", "[[#]]"}) {
    Config c;
    ProfileReport r = load_profile_text(text, "trap.toml", c);
    EXPECT_FALSE(r.ok()) << text;
  }
}

}  // namespace
}  // namespace cmt
