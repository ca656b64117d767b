// A profile written by `cmt tune` reads back through the library's loader to the same knobs,
// with its [machine] matching the machine it describes and its measurements kept.
#include <gtest/gtest.h>

#include "config/profile.h"
#include "profile_writer.h"

namespace cmt {
namespace {

TEST(ProfileWriter, WhatTuneWritesTheLoaderReadsBack) {
  MachineFingerprint here;
  here.cpu_model = "Intel(R) Xeon(R) \"Quoted\" CPU";
  here.cpus = 16;
  here.gpus = {"10de:2335"};
  here.pcie = "32.0 GT/s PCIe x16";
  here.driver = "580.159.04";
  Config tuned;
  tuned.threads = 10;
  tuned.chunk_bytes = 4u << 20;
  tuned.slots = 8;
  tuned.threshold = 256u << 10;
  tuned.h2d_method = CopyMethod::Streaming;
  tuned.d2h_method = CopyMethod::Memcpy;
  tuned.spin_us = 77;  // not a tuned knob: must not be written
  TuneRecord record;
  record.search = "full";
  record.date = "2026-11-29T21:00:00Z";
  record.seconds = 44.8;
  record.mix_gbps = 40.8;
  record.notes = {"a note with \"quotes\" and a\nnewline"};
  record.rows.push_back({4u << 20, Direction::HostToDevice, 15.6, 21.7, 32.0, 49.9});
  const std::string text = profile_toml(here, tuned, record);

  Config loaded;
  ProfileReport report = load_profile_text(text, "tuned.toml", loaded, &here);
  ASSERT_TRUE(report.ok()) << report.errors[0] << "\n" << text;
  EXPECT_TRUE(report.warnings.empty()) << report.warnings[0];
  EXPECT_EQ(loaded.threads, 10u);
  EXPECT_EQ(loaded.chunk_bytes, 4u << 20);
  EXPECT_EQ(loaded.slots, 8u);
  EXPECT_EQ(loaded.threshold, 256u << 10);
  EXPECT_EQ(loaded.h2d_method, CopyMethod::Streaming);
  EXPECT_EQ(loaded.d2h_method, CopyMethod::Memcpy);
  EXPECT_EQ(loaded.spin_us, Config().spin_us);
  EXPECT_NE(text.find("mix_gbps = 40.8\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tuned_gbps = 32"), std::string::npos) << text;

  MachineFingerprint other = here;
  other.gpus = {"10de:2330"};
  Config untouched;
  EXPECT_FALSE(load_profile_text(text, "tuned.toml", untouched, &other).ok());
}

// `cmt tune --per-gpu`: each GPU's lane knobs under [gpu."BUS"], merged into one profile.
TEST(ProfileWriter, PerGpuTablesMergeIntoOneProfile) {
  MachineFingerprint here;
  here.cpu_model = "CPU";
  here.cpus = 32;
  here.gpus = {"10de:2335", "10de:2335"};
  TuneRecord record;
  record.search = "instant";
  Config first;
  first.threads = 6;
  first.threshold = 1u << 20;
  Config second;
  second.threads = 9;
  second.slots = 20;
  second.threshold = 512u << 10;
  std::string text = profile_toml(here, first, record, "0000:1B:00.0");
  text = profile_toml(here, second, record, "0000:3d:00.0", text);
  Config loaded;
  ProfileReport report = load_profile_text(text, "gpus.toml", loaded, &here);
  ASSERT_TRUE(report.ok()) << report.errors[0] << "\n" << text;
  EXPECT_EQ(loaded.per_gpu["0000:1b:00.0"]["threads"], "6");
  EXPECT_EQ(loaded.per_gpu["0000:3d:00.0"]["threads"], "9");
  EXPECT_EQ(loaded.per_gpu["0000:3d:00.0"]["slots"], "20");
  EXPECT_EQ(loaded.threads, Config().threads);          // lane knobs are per GPU only
  EXPECT_EQ(loaded.threshold, std::size_t{512} << 10);  // the last run's threshold
  EXPECT_EQ(config_for_gpu(loaded, "0000:1b:00.0").threads, 6u);
}

TEST(ProfileWriter, SizesAreWrittenTheWayPeopleWriteThem) {
  EXPECT_EQ(format_byte_size(4u << 20), "4M");
  EXPECT_EQ(format_byte_size(256u << 10), "256K");
  EXPECT_EQ(format_byte_size(std::size_t{1} << 30), "1G");
  EXPECT_EQ(format_byte_size(1000), "1000");
}

}  // namespace
}  // namespace cmt
