// Classification and the interposer's decisions against the fake driver: what is taken, what is
// forwarded and why, and that a forwarded call is left entirely to CUDA.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "fake_driver.h"
#include "interposer/classify.h"
#include "interposer/interposer.h"
#include "interposer/stats.h"

namespace cmt {
namespace {

constexpr std::size_t kMiB = 1 << 20;

TEST(Classify, TakesPageableToDeviceBothWays) {
  fake::FakeDriver fake;
  std::vector<char> host(4 * kMiB);
  CUdeviceptr dev = fake.alloc_device(4 * kMiB);
  auto* d = reinterpret_cast<void*>(dev);
  CopyDecision up = classify_copy(fake.api(), d, host.data(), host.size(), kHostToDevice,
                                  CU_STREAM_LEGACY, {kMiB, kMiB});
  ASSERT_TRUE(up.taken());
  EXPECT_EQ(up.request.direction, Direction::HostToDevice);
  EXPECT_EQ(up.request.host, host.data());
  EXPECT_EQ(up.request.device, dev);
  CopyDecision down = classify_copy(fake.api(), host.data(), d, host.size(), kDefault,
                                    CU_STREAM_PER_THREAD, {kMiB, kMiB});
  ASSERT_TRUE(down.taken());
  EXPECT_EQ(down.request.direction, Direction::DeviceToHost);
  EXPECT_EQ(down.request.stream, CU_STREAM_PER_THREAD);
}

// Each direction has its own threshold: CUDA's own device-to-host path is the slower one at small
// sizes, so cmt takes those from a smaller size.
TEST(Classify, EachDirectionHasItsThreshold) {
  fake::FakeDriver fake;
  std::vector<char> host(kMiB);
  auto* d = reinterpret_cast<void*>(fake.alloc_device(kMiB));
  const Thresholds t{kMiB, 64 << 10};
  auto why = [&](void* dst, const void* src, std::size_t n) {
    return classify_copy(fake.api(), dst, src, n, kDefault, CU_STREAM_LEGACY, t).reason;
  };
  EXPECT_EQ(why(d, host.data(), kMiB - 1), ForwardReason::BelowThreshold);
  EXPECT_EQ(why(d, host.data(), kMiB), ForwardReason::Taken);
  EXPECT_EQ(why(host.data(), d, 64 << 10), ForwardReason::Taken);
  EXPECT_EQ(why(host.data(), d, (64 << 10) - 1), ForwardReason::BelowThreshold);
  // Below both, nothing is asked of the driver.
  const long calls = fake.pointer_queries.load();
  EXPECT_EQ(why(host.data(), d, 4096), ForwardReason::BelowThreshold);
  EXPECT_EQ(fake.pointer_queries.load(), calls);
}

TEST(Classify, ForwardsEverythingElseWithItsReason) {
  fake::FakeDriver fake;
  std::vector<char> host(4 * kMiB), host2(4 * kMiB);
  void* pinned = fake.alloc_pinned(4 * kMiB);
  auto* d = reinterpret_cast<void*>(fake.alloc_device(4 * kMiB));
  auto* d2 = reinterpret_cast<void*>(fake.alloc_device(4 * kMiB));
  auto why = [&](void* dst, const void* src, std::size_t n, int kind) {
    return classify_copy(fake.api(), dst, src, n, kind, CU_STREAM_LEGACY, {kMiB, kMiB}).reason;
  };
  EXPECT_EQ(why(d, host.data(), kMiB - 1, kHostToDevice), ForwardReason::BelowThreshold);
  EXPECT_EQ(why(d, pinned, kMiB, kHostToDevice), ForwardReason::PinnedOrManaged);
  EXPECT_EQ(why(pinned, d, kMiB, kDefault), ForwardReason::PinnedOrManaged);
  EXPECT_EQ(why(d2, d, kMiB, kDeviceToDevice), ForwardReason::KindNotHandled);
  EXPECT_TRUE(classify_copy(fake.api(), d2, d, kMiB, kDefault, CU_STREAM_LEGACY, {kMiB, kMiB})
                  .for_peer_path);  // the peer path's to decide
  EXPECT_FALSE(classify_copy(fake.api(), d, host.data(), kMiB, kDefault, CU_STREAM_LEGACY,
                             {kMiB, kMiB})
                   .for_peer_path);
  EXPECT_EQ(why(host2.data(), host.data(), kMiB, kHostToHost), ForwardReason::KindNotHandled);
  EXPECT_EQ(why(host2.data(), host.data(), kMiB, kDefault), ForwardReason::NotPageableToDevice);
  // The kind says H2D but the pointers say D2H: CUDA decides, not cmt.
  EXPECT_EQ(why(host.data(), d, kMiB, kHostToDevice), ForwardReason::NotPageableToDevice);
  EXPECT_EQ(why(d, nullptr, kMiB, kHostToDevice), ForwardReason::NotPageableToDevice);
  EXPECT_EQ(why(d, host.data(), kMiB, 7), ForwardReason::KindNotHandled);
  // Past the end of the device allocation.
  EXPECT_EQ(why(static_cast<char*>(d) + kMiB, host.data(), 3 * kMiB + 1, kHostToDevice),
            ForwardReason::OutOfRange);
  EXPECT_EQ(why(static_cast<char*>(d) + kMiB, host.data(), 3 * kMiB, kHostToDevice),
            ForwardReason::Taken);
  fake.faults.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  EXPECT_EQ(why(d, host.data(), kMiB, kHostToDevice), ForwardReason::Capturing);
  fake.faults.capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  EXPECT_EQ(why(d, host.data(), kMiB, kHostToDevice), ForwardReason::Capturing);
  fake.faults.capture = CU_STREAM_CAPTURE_STATUS_NONE;
  fake.faults.no_context = true;
  EXPECT_EQ(why(d, host.data(), kMiB, kHostToDevice), ForwardReason::NoContext);
}

TEST(Interposer, TakesForwardsAndCounts) {
  fake::FakeDriver fake;
  Config config;
  config.threads = 2;
  config.chunk_bytes = 256 << 10;
  config.slots = 4;
  config.threshold = kMiB;
  Interposer interposer(&fake.api(), config);
  std::vector<char> host(3 * kMiB + 5, 'x');
  auto* d = reinterpret_cast<void*>(fake.alloc_device(host.size()));
  EXPECT_EQ(interposer.take_copy(d, host.data(), host.size(), kHostToDevice, CU_STREAM_LEGACY, true,
                                Entry::Runtime),
            host.size());
  EXPECT_EQ(interposer.take_copy(d, host.data(), 100, kHostToDevice, CU_STREAM_LEGACY, true,
                                Entry::Runtime),
            0u);
  std::vector<char> back(host.size());
  EXPECT_EQ(interposer.take_copy(back.data(), d, back.size(), kDeviceToHost, CU_STREAM_LEGACY, true,
                                Entry::Driver),
            back.size());
  EXPECT_EQ(0, std::memcmp(back.data(), host.data(), host.size()));
  EXPECT_EQ(interposer.stats().taken_calls(), 2u);
  std::string json = interposer.stats().to_json();
  EXPECT_NE(json.find("\"below_threshold\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"taken_via\": {\"runtime\": 1, \"driver\": 1, \"batch\": 0}"),
            std::string::npos)
      << json;
  // 3 MiB + 5 bytes falls in the [2 MiB, 4 MiB) bucket, once per direction.
  EXPECT_NE(
      json.find("\"sizes\": {\"h2d\": [[2097152, 1, 3145733]], \"d2h\": [[2097152, 1, 3145733]]}"),
      std::string::npos)
      << json;
}

TEST(Interposer, CountsCopiesIntoFreshMemory) {
  fake::FakeDriver fake;
  Config config;
  config.threads = 2;
  config.threshold = kMiB;
  Interposer interposer(&fake.api(), config);
  const std::size_t bytes = 16 * kMiB;
  std::vector<char> host(bytes, 'y');
  auto* d = reinterpret_cast<void*>(fake.alloc_device(bytes));
  ASSERT_EQ(interposer.take_copy(d, host.data(), bytes, kHostToDevice, CU_STREAM_LEGACY, true,
                                Entry::Runtime),
            bytes);
  void* fresh = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(fresh, MAP_FAILED);
  for (int round = 0; round < 2; ++round)  // the second time the memory is in use
    ASSERT_EQ(
        interposer.take_copy(fresh, d, bytes, kDeviceToHost, CU_STREAM_LEGACY, true, Entry::Runtime),
        bytes);
  EXPECT_EQ(0, std::memcmp(fresh, host.data(), bytes));
  munmap(fresh, bytes);
  // The mapping starts on a page, not necessarily on a 2 MiB block: 7 or 8 whole blocks.
  std::string json = interposer.stats().to_json();
  EXPECT_TRUE(json.find("\"fresh_destinations\": {\"calls\": 1, \"bytes\": 14680064}") !=
                  std::string::npos ||
              json.find("\"fresh_destinations\": {\"calls\": 1, \"bytes\": 16777216}") !=
                  std::string::npos)
      << json;
  EXPECT_NE(interposer.stats().summary().find("D2H into fresh memory: 1"), std::string::npos)
      << interposer.stats().summary();
}

// What cmt's copy threads cost the program in CPU is reported beside what cmt took, and is
// theirs: a copy's threads work and spin (spin_us), then sleep and cost nothing more.
TEST(Interposer, ReportsItsCopyThreadsCpuTime) {
  fake::FakeDriver fake;
  Config config;
  config.threads = 2;
  config.threshold = kMiB;
  config.spin_us = 20000;
  Interposer interposer(&fake.api(), config);
  EXPECT_EQ(interposer.copy_threads_cpu_seconds(), 0.0);  // no engine yet: no threads
  const std::size_t bytes = 16 * kMiB;
  std::vector<char> host(bytes, 'c');
  auto* d = reinterpret_cast<void*>(fake.alloc_device(bytes));
  ASSERT_EQ(interposer.take_copy(d, host.data(), bytes, kHostToDevice, CU_STREAM_LEGACY, true,
                                 Entry::Runtime),
            bytes);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the spin is over
  const double after_copy = interposer.copy_threads_cpu_seconds();
  EXPECT_GT(after_copy, 0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LT(interposer.copy_threads_cpu_seconds() - after_copy, 0.02)
      << "sleeping threads spent CPU";
  const std::string json = interposer.stats().to_json(after_copy);
  EXPECT_NE(json.find("\"copy_threads\": {\"cpu_seconds\": "), std::string::npos) << json;
  EXPECT_EQ(interposer.stats().to_json().find("copy_threads"), std::string::npos);
  const std::string line = interposer.stats().summary(after_copy);
  EXPECT_NE(line.find("cmt's copy threads: "), std::string::npos) << line;
  EXPECT_NE(line.find(" s per GB taken)"), std::string::npos) << line;
}

TEST(Interposer, DisabledForwardsEverything) {
  fake::FakeDriver fake;
  Config config;
  config.disable = true;
  config.threshold = 0;
  Interposer interposer(&fake.api(), config);
  std::vector<char> host(2 * kMiB);
  auto* d = reinterpret_cast<void*>(fake.alloc_device(host.size()));
  EXPECT_EQ(interposer.take_copy(d, host.data(), host.size(), kHostToDevice, CU_STREAM_LEGACY, true,
                                Entry::Runtime),
            0u);
  EXPECT_EQ(fake.dma_count.load(), 0);
}

TEST(Interposer, NoDriverForwardsEverything) {
  Config config;
  config.threshold = 0;
  Interposer interposer(nullptr, config);
  std::vector<char> a(kMiB), b(kMiB);
  EXPECT_EQ(interposer.take_copy(a.data(), b.data(), kMiB, kDefault, CU_STREAM_LEGACY, true,
                                Entry::Driver),
            0u);
}

// A child forked after the process used CUDA (here: once cmt was asked about a copy) forwards
// every copy, whatever the parent was doing at the fork, an engine half built included: it cannot
// use CUDA, and must get CUDA's own answer rather than build an engine of its own.
TEST(InterposerFork, AForkedChildForwardsEverything) {
  Interposer::configure();  // the process-wide instance, and its fork handlers
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char> host(8 << 20, 1);
    const std::size_t done =
        Interposer::offer_copy(reinterpret_cast<void*>(0x1000), host.data(), host.size(),
                               kHostToDevice, CU_STREAM_LEGACY, true, Entry::Runtime);
    const std::string json = Interposer::instance().stats().to_json();
    _exit(done == 0 && json.find("\"forked_child\": 1") != std::string::npos ? 0 : 1);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child did not forward as a forked child";
}

}  // namespace
}  // namespace cmt
