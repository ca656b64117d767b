// A profile written by `cmt tune` reads back through the library's loader to the same knobs,
// with its [machine] matching the machine it describes and its measurements kept.
#include <gtest/gtest.h>

#include "profile.h"
#include "profile_writer.h"
#include "tune.h"

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

TEST(ProfileWriter, SizesAreWrittenTheWayPeopleWriteThem) {
  EXPECT_EQ(size_text(4u << 20), "4M");
  EXPECT_EQ(size_text(256u << 10), "256K");
  EXPECT_EQ(size_text(std::size_t{1} << 30), "1G");
  EXPECT_EQ(size_text(1000), "1000");
}

}  // namespace
}  // namespace cmt
