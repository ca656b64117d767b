// The recorder's view of host memory (interposer/recorder.h: what a sampled range was) and the
// trace files `cmt trace show` reads (tuner/trace_file.h): sections, errors naming the line, and
// the figures of the summary.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "interposer/host_memory.h"
#include "interposer/recorder.h"
#include "replay_plan.h"
#include "trace_file.h"

namespace cmt {
namespace {

constexpr std::size_t kBytes = 64 << 20;

TEST(HostKind, AnonymousMemoryIsFreshUntilWritten) {
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(sample_host_kind(p, kBytes), HostKind::Fresh);
  std::memset(p, 1, kBytes / 2);
  EXPECT_EQ(sample_host_kind(p, kBytes / 2), HostKind::Resident);
  EXPECT_EQ(sample_host_kind(p, kBytes), HostKind::Mixed);
  munmap(p, kBytes);
}

TEST(HostKind, AFileMappingIsCachedThenMapped) {
  char path[] = "/tmp/cmt-trace-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string block(1 << 20, 'x');
  for (std::size_t done = 0; done < kBytes; done += block.size())
    ASSERT_EQ(write(fd, block.data(), block.size()), static_cast<ssize_t>(block.size()));
  fsync(fd);  // written through the page cache: it holds the file now
  void* p = mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(sample_host_kind(p, kBytes), HostKind::FileCached);  // in the cache, not mapped in
  volatile char sum = 0;
  for (std::size_t i = 0; i < kBytes; i += 4096) sum += static_cast<const char*>(p)[i];
  EXPECT_EQ(sample_host_kind(p, kBytes), HostKind::FileMapped);
  munmap(p, kBytes);
  close(fd);
  unlink(path);
}

TEST(HostKind, CudaHostMemoryIsPinnedAndNoHostIsNone) {
  static char buffer[1 << 16];
  ASSERT_TRUE(cuda_host_memory().add(buffer, sizeof buffer));
  EXPECT_EQ(sample_host_kind(buffer + 100, 1000), HostKind::Pinned);
  cuda_host_memory().remove(buffer);
  EXPECT_EQ(sample_host_kind(nullptr, 1000), HostKind::None);
  EXPECT_STREQ(host_kind_name(HostKind::FileCached), "file_cached");
}

std::string write_file(const std::string& text) {
  char path[] = "/tmp/cmt-trace-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

const char* const kHeader =
    "start_ns\tend_ns\ttid\tapi\tdirection\tbytes\ttaken_bytes\toutcome\thost\tstream\tresult\n";

TEST(TraceFile, ReadsSectionsOfSeveralProcesses) {
  const std::string path = write_file(
      std::string("# cmt trace 1 pid=10 exe=/bin/a calls=2 dropped=1\n") + kHeader +
      "1000\t3000\t10\tcudaMemcpyAsync\th2d\t4000\t4000\ttaken\tresident\t0x0\t0\n"
      "2000\t4000\t11\tcudaMemcpyAsync\th2d\t2000\t2000\ttaken\tfile_cached\t0x0\t0\n"
      "# cmt trace 1 pid=12 exe=/bin/b calls=1 dropped=0\n" + kHeader +
      "10000\t11000\t12\tcuMemcpyDtoH_v2\td2h\t100\t0\tbelow_threshold\tresident\t0x1\t0\n");
  Trace t;
  std::string error;
  ASSERT_TRUE(read_trace_file(path, &t, &error)) << error;
  unlink(path.c_str());
  ASSERT_EQ(t.processes.size(), 2u);
  EXPECT_EQ(t.processes[1], "pid 12 /bin/b");
  ASSERT_EQ(t.calls.size(), 3u);
  EXPECT_EQ(t.dropped, 1u);
  EXPECT_EQ(t.calls[2].process, 1);
  // In flight: [1000, 4000) and [10000, 11000): 4000 ns; the taken ones only: 3000.
  EXPECT_EQ(in_flight_ns(t.calls, [](const TraceCall&) { return true; }), 4000u);
  EXPECT_EQ(in_flight_ns(t.calls, [](const TraceCall& c) { return c.taken_bytes > 0; }), 3000u);
  const std::string report = describe_trace(t);
  // 6000 bytes over 3000 ns in flight together; over 4000 ns of the calls' own times, per copy.
  EXPECT_NE(report.find("1.5 GB/s per copy"), std::string::npos) << report;
  EXPECT_NE(report.find("2.0 GB/s together"), std::string::npos) << report;
  EXPECT_NE(report.find("below_threshold: 1 calls"), std::string::npos) << report;
  EXPECT_NE(report.find("2: 0.000 s"), std::string::npos) << report;  // two at once, 1 us
}

TEST(TraceFile, Version2SaysWhatTheEngineDid) {
  const std::string columns = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) +
                              "\tlane\tlane_built\tfirst_dma_ns\n";
  const std::string path = write_file(
      "# cmt trace 2 pid=3 exe=/bin/c\n" + columns +
      "1000\t9000\t3\tcudaMemcpyAsync\th2d\t4000\t4000\ttaken\tresident\t0x0\t0\t0\t1\t300000\n"
      "2000\t8000\t4\tcudaMemcpyAsync\th2d\t4000\t4000\ttaken\tresident\t0x0\t0\t1\t1\t100000\n"
      "9000\t9500\t3\tcudaMemcpyAsync\th2d\t4000\t4000\ttaken\tresident\t0x0\t0\t0\t0\t50000\n"
      "9600\t9700\t3\tcudaMemcpyAsync\th2d\t10\t0\tbelow_threshold\tresident\t0x0\t0\t-1\t0\t-1\n");
  Trace t;
  std::string error;
  ASSERT_TRUE(read_trace_file(path, &t, &error)) << error;
  unlink(path.c_str());
  ASSERT_EQ(t.calls.size(), 4u);
  EXPECT_EQ(t.calls[1].lane, 1);
  EXPECT_TRUE(t.calls[1].lane_built);
  EXPECT_EQ(t.calls[2].first_dma_ns, 50000);
  const std::string report = describe_trace(t);
  EXPECT_NE(report.find("the first DMA a median 100 us"), std::string::npos) << report;
  EXPECT_NE(report.find("copies by lane: 0: 2 1: 1; 2 made their lane's staging ring (their "
                        "first DMA 0.3 ms after the engine had them at most, 0.4 ms in all)"),
            std::string::npos)
      << report;
}

TEST(TraceFile, Version3SaysHowLongCopiesWaitedForALaneAndHowBusyLanesWere) {
  const std::string columns = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) +
                              "\tlane\tlane_built\tfirst_dma_ns\tlane_wait_ns\n";
  // Lane 0 holds copies over [0, 4) and [6, 10) ms of the direction's 10 ms: 80% busy. The second
  // copy waited 2 ms for it (the first 0.9 us: taking a free lane); lane 1 ran one copy over
  // [0, 5) ms: 50%.
  const std::string path = write_file(
      "# cmt trace 3 pid=3 exe=/bin/c\n" + columns +
      "0\t4000000\t3\tcudaMemcpyAsync\th2d\t4000\t4000\ttaken\tresident\t0x0\t0\t0\t0\t100\t900\n"
      "4000000\t10000000\t3\tcudaMemcpyAsync\th2d\t4000\t4000\ttaken\tresident\t0x0\t0\t0\t0\t100"
      "\t2000000\n"
      "0\t5000000\t4\tcudaMemcpyAsync\th2d\t4000\t4000\ttaken\tresident\t0x0\t0\t1\t1\t100\t0\n");
  Trace t;
  std::string error;
  ASSERT_TRUE(read_trace_file(path, &t, &error)) << error;
  unlink(path.c_str());
  ASSERT_EQ(t.calls.size(), 3u);
  EXPECT_EQ(t.calls[2].lane_wait_ns, 2000000);
  const std::string report = describe_trace(t);
  EXPECT_NE(report.find("lane waits: 1 copies waited for a free lane, median 2000 us"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("h2d lane 0 80%; h2d lane 1 50%"), std::string::npos) << report;
}

// One version-4 call line: a call of 1 ms at `start_ms` on thread 3, taken or not, `host_at` its
// host side.
std::string v4_call(int start_ms, const char* direction, std::size_t bytes, const char* outcome,
                    const char* host, const char* host_at) {
  const bool taken = std::string(outcome) == "taken" || std::string(outcome) == "hot";
  return std::to_string(start_ms * 1000000) + "\t" + std::to_string(start_ms * 1000000 + 1000000) +
         "\t3\tcudaMemcpyAsync\t" + direction + "\t" + std::to_string(bytes) + "\t" +
         std::to_string(taken ? bytes : 0) + "\t" + outcome + "\t" + host +
         "\t0x0\t0\t-1\t0\t-1\t-1\t" + host_at + "\n";
}

TEST(TraceFile, Version4SaysWhatWasCopiedAgainFromTheSameHostBuffers) {
  const std::string columns = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) +
                              "\tlane\tlane_built\tfirst_dma_ns\tlane_wait_ns\thost_at\n";
  const std::size_t mib = 1 << 20;
  std::string a = "# cmt trace 4 pid=3 exe=/bin/a\n" + columns;
  // 1 MiB at 0x1000: to the GPU three times, then back (one buffer either way).
  for (int i = 0; i < 3; ++i) a += v4_call(i, "h2d", mib, "taken", "resident", "0x1000");
  a += v4_call(3, "d2h", mib, "taken", "resident", "0x1000");
  a += v4_call(4, "h2d", 2 * mib, "taken", "resident", "0x9000000");  // once
  // Copied twice from cmt's registration of it: counted.
  for (int i = 5; i < 7; ++i) a += v4_call(i, "h2d", mib, "hot", "pinned", "0x7000000");
  // Not counted: too small for a hot buffer, the program's pinned memory, no host side.
  for (int i = 7; i < 12; ++i)
    a += v4_call(i, "h2d", 4096, "below_threshold", "resident", "0x1000");
  for (int i = 12; i < 15; ++i)
    a += v4_call(i, "h2d", mib, "pinned_or_managed", "pinned", "0x5000");
  a += v4_call(15, "d2d", mib, "taken", "-", "0x0");
  // Another process's buffer at the same address is another buffer.
  const std::string b = "# cmt trace 4 pid=4 exe=/bin/b\n" + columns +
                        v4_call(0, "h2d", mib, "taken", "resident", "0x1000");
  const std::string path = write_file(a + b);
  Trace t;
  std::string error;
  ASSERT_TRUE(read_trace_file(path, &t, &error)) << error;
  unlink(path.c_str());
  ASSERT_EQ(t.calls.size(), 17u);
  EXPECT_EQ(t.calls.front().host_at, 0x1000u);
  const std::string report = describe_trace(t);
  EXPECT_NE(
      report.find("  8 copies of 4 buffers; 2 copied twice or more, 0 10 times or more, 0 100 "
                  "times or more (at most 4)\n"),
      std::string::npos)
      << report;
  EXPECT_NE(report.find("  from a buffer copied before: 4 copies, 4.0 MiB (44% of the bytes), "
                        "0.004 s in the calls\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("  from its third copy on: 2 copies, 2.0 MiB (22% of the bytes), 0.002 s"),
            std::string::npos)
      << report;
  // A version-3 trace does not say where host sides were: no such section.
  Trace old;
  const std::string v3 = write_file(
      "# cmt trace 3 pid=3 exe=/bin/c\n" +
      columns.substr(0, columns.size() - std::string("\thost_at\n").size()) + "\n" +
      "0\t4000000\t3\tcudaMemcpyAsync\th2d\t4000\t4000\ttaken\tresident\t0x0\t0\t0\t0\t100\t900\n");
  ASSERT_TRUE(read_trace_file(v3, &old, &error)) << error;
  unlink(v3.c_str());
  EXPECT_EQ(describe_trace(old).find("copied again"), std::string::npos);
  // A host_at that is not an address is named.
  const std::string bad = write_file("# cmt trace 4 pid=3 exe=/bin/c\n" + columns +
                                     v4_call(0, "h2d", mib, "taken", "resident", "4096"));
  EXPECT_FALSE(read_trace_file(bad, &old, &error));
  unlink(bad.c_str());
  EXPECT_NE(error.find(":3: field 16 (host_at, '4096') is not an address"), std::string::npos)
      << error;
}

// Version 5: each copy's time on its stream and its stream's other work before it. The report
// weighs copies by their streams' time beside their calls' (a staged async copy's call returns
// before its DMA ends), and says how long the streams ran other work between copies; -1 is "not
// known"; a field that is neither -1 nor a whole number is named.
TEST(TraceFile, Version5SaysWhatCopiesTookOnTheirStreams) {
  const std::string columns =
      std::string(kHeader).substr(0, std::string(kHeader).size() - 1) +
      "\tlane\tlane_built\tfirst_dma_ns\tlane_wait_ns\thost_at\tgpu_ns\tgpu_gap_ns\n";
  const std::size_t mib = 1 << 20;
  auto v5 = [&](int start_ms, const char* outcome, const char* host, const char* gpu,
                const char* gap) {
    std::string line = v4_call(start_ms, "h2d", 8 * mib, outcome, host, "0x1000");
    line.pop_back();
    return line + "\t" + gpu + "\t" + gap + "\n";
  };
  // Staged by cmt: calls of 1 ms, 2 ms each on the stream, after 3 and 5 ms of kernels.
  const std::string text = "# cmt trace 5 pid=3 exe=/bin/a\n" + columns +
                           v5(0, "taken", "resident", "2000000", "-1") +
                           v5(10, "taken", "resident", "2000000", "3000000") +
                           v5(20, "pinned_or_managed", "pinned", "1000000", "5000000") +
                           v5(30, "taken", "resident", "-1", "-1");
  const std::string path = write_file(text);
  Trace t;
  std::string error;
  ASSERT_TRUE(read_trace_file(path, &t, &error)) << error;
  unlink(path.c_str());
  ASSERT_EQ(t.calls.size(), 4u);
  EXPECT_EQ(t.calls[1].gpu_ns, 2000000);
  EXPECT_EQ(t.calls[1].gpu_gap_ns, 3000000);
  EXPECT_EQ(t.calls[3].gpu_ns, -1);
  const std::string report = describe_trace(t);
  EXPECT_NE(report.find("  staged by cmt: 2 copies, 0.004 s on the stream (4.2 GB/s), 0.002 s in "
                        "their calls (8.4 GB/s)\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("  from CUDA host memory: 1 copies, 0.001 s on the stream (8.4 GB/s)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("  the streams' other work (or idle time) between copies: 2 gaps, median "
                        "5000 us, 90th percentile 5000 us, 0.008 s in all\n"),
            std::string::npos)
      << report;
  // The replay's plan: the GPU work before each copy after the thread's first.
  const replay::Plan plan = replay::plan_replay(t, 0, ~0ull >> 1);
  ASSERT_EQ(plan.threads.size(), 1u);
  const auto& copies = plan.threads[0].copies;
  ASSERT_EQ(copies.size(), 4u);
  EXPECT_EQ(copies[0].gpu_gap_ns, -1);
  EXPECT_EQ(copies[1].gpu_gap_ns, 3000000);
  EXPECT_EQ(copies[2].gpu_gap_ns, 5000000);
  EXPECT_EQ(copies[3].gpu_gap_ns, -1);
  const std::string bad = write_file("# cmt trace 5 pid=3 exe=/bin/c\n" + columns +
                                     v5(0, "taken", "resident", "-2", "0"));
  EXPECT_FALSE(read_trace_file(bad, &t, &error));
  unlink(bad.c_str());
  EXPECT_NE(error.find(":3: fields 17-18 (gpu_ns, gpu_gap_ns) are not -1 or a whole number"),
            std::string::npos)
      << error;
}

// Version 6: the program's synchronize calls, kept apart from its copies. A thread's time between
// copies splits into its waits and its own work; the replay waits after the copies the program
// waited for, and only there, and does not replay a wait as CPU work. Another thread's wait is
// not this thread's.
TEST(TraceFile, Version6SplitsTheTimeBetweenCopiesIntoWaitsAndWork) {
  const std::string columns =
      std::string(kHeader).substr(0, std::string(kHeader).size() - 1) +
      "\tlane\tlane_built\tfirst_dma_ns\tlane_wait_ns\thost_at\tgpu_ns\tgpu_gap_ns\n";
  const std::size_t mib = 1 << 20;
  auto copy_at = [&](int start_ms) {
    std::string line = v4_call(start_ms, "h2d", 8 * mib, "taken", "resident", "0x1000");
    line.pop_back();
    return line + "\t-1\t-1\n";
  };
  auto wait = [](const char* start, const char* end, int tid, const char* api) {
    return std::string(start) + "\t" + end + "\t" + std::to_string(tid) + "\t" + api +
           "\twait\t0\t0\twait\t-\t0x2\t0\t-1\t0\t-1\t-1\t0x0\t-1\t-1\n";
  };
  // Copies of 1 ms at 0, 10 and 20 ms on thread 3; it waits 3 ms after the first; thread 4 waits
  // 1 ms during the second gap.
  const std::string text = "# cmt trace 6 pid=3 exe=/bin/a\n" + columns + copy_at(0) +
                           wait("1500000", "4500000", 3, "cudaStreamSynchronize") + copy_at(10) +
                           wait("12000000", "13000000", 4, "cuCtxSynchronize") + copy_at(20);
  const std::string path = write_file(text);
  Trace t;
  std::string error;
  ASSERT_TRUE(read_trace_file(path, &t, &error)) << error;
  unlink(path.c_str());
  ASSERT_EQ(t.calls.size(), 3u);
  ASSERT_EQ(t.waits.size(), 2u);
  EXPECT_TRUE(t.waits_recorded);
  const std::vector<GapSplit> split = split_gaps(t);
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(split[0].gap_ns, 9000000u);
  EXPECT_EQ(split[0].waited_ns, 3000000u);
  EXPECT_TRUE(split[0].waited_after);
  EXPECT_EQ(split[1].gap_ns, 9000000u);
  EXPECT_EQ(split[1].waited_ns, 0u);
  EXPECT_FALSE(split[1].waited_after);
  EXPECT_FALSE(split[2].waited_after);
  const std::string report = describe_trace(t);
  EXPECT_NE(report.find("waits for the GPU (synchronize calls): 2 calls, cuCtxSynchronize 1 (0.001 "
                        "s), cudaStreamSynchronize 1 (0.003 s)\n  between a thread's copies: "
                        "0.018 s, of which 0.003 s inside synchronize calls and 0.015 s the "
                        "program's own work; 1 of 3 copies followed by a wait before the "
                        "thread's next copy\n  host <-> device copies with the waits right "
                        "after them: 24.0 MiB in 0.006 s (4.2 GB/s): what they cost a thread "
                        "that waits for each\n"),
            std::string::npos)
      << report;
  // From 0 to 21 ms, 7 ms with a copy or a wait in flight (the waits on both threads count).
  EXPECT_NE(report.find("  no thread inside a copy, a host-leg call or a synchronize call: 0.014 s "
                        "of the 0.021 s from the first call to the last end; no copy speed-up "
                        "makes that stretch shorter (1.50x at most)\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("calls (0 not kept)"), std::string::npos) << report;
  EXPECT_NE(report.find(", 3 calls (0 not kept)"), std::string::npos) << report;
  const replay::Plan plan = replay::plan_replay(t, 0, ~0ull >> 1);
  EXPECT_TRUE(plan.waits_recorded);
  ASSERT_EQ(plan.threads.size(), 1u);
  const auto& copies = plan.threads[0].copies;
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_TRUE(copies[0].wait_after);
  EXPECT_EQ(copies[1].gap_ns, 6000000u);  // 9 ms after the first copy, 3 of them waiting
  EXPECT_FALSE(copies[1].wait_after);
  EXPECT_EQ(copies[2].gap_ns, 9000000u);
  EXPECT_FALSE(copies[2].wait_after);
  // A host-leg call between a copy and the wait that follows it: the wait still follows the copy
  // (the replay leaves the host leg out), and its time is still no work.
  Trace leg = t;
  TraceCall memcpy_call = leg.calls[1];
  memcpy_call.api = "memcpy";
  memcpy_call.direction = "h2h";
  memcpy_call.start_ns = 11500000;
  memcpy_call.end_ns = 12000000;
  leg.calls.insert(leg.calls.begin() + 2, memcpy_call);
  TraceCall own_wait = leg.waits[0];
  own_wait.start_ns = 12500000;  // 12.5 to 15.5 ms, on thread 3, after the memcpy
  own_wait.end_ns = 15500000;
  leg.waits.push_back(own_wait);
  const replay::Plan with_leg = replay::plan_replay(leg, 0, ~0ull >> 1);
  ASSERT_EQ(with_leg.threads[0].copies.size(), 3u);
  EXPECT_TRUE(with_leg.threads[0].copies[1].wait_after);
  // From the second copy's end (11 ms) to the third's start (20 ms), 3 ms of it waiting.
  EXPECT_EQ(with_leg.threads[0].copies[2].gap_ns, 6000000u);
  // A trace before version 6 does not say: every copy is waited for, its gaps whole.
  Trace old = t;
  old.waits.clear();
  old.waits_recorded = false;
  const replay::Plan before = replay::plan_replay(old, 0, ~0ull >> 1);
  EXPECT_FALSE(before.waits_recorded);
  EXPECT_TRUE(before.threads[0].copies[1].wait_after);
  EXPECT_EQ(before.threads[0].copies[1].gap_ns, 9000000u);
  EXPECT_NE(describe_trace(old).find("waits for the GPU: not in the trace (one before version 6)"),
            std::string::npos);
}

TraceCall call(int process, int tid, std::uint64_t start_us, const char* api, const char* direction,
               std::uint64_t bytes, const char* outcome, const char* host, std::uint64_t host_at) {
  TraceCall c;
  c.process = process;
  c.tid = tid;
  c.start_ns = start_us * 1000;
  c.end_ns = c.start_ns + 500;
  c.api = api;
  c.direction = direction;
  c.bytes = bytes;
  c.outcome = outcome;
  c.host = host;
  c.host_at = host_at;
  return c;
}

// cmt bench replay's plan (replay_plan.h): a buffer the program copied more than once is replayed
// from one of its own, whichever thread or direction; every other resident copy from a place of
// its own; copies from cmt's registrations as the pageable copies they were.
TEST(ReplayPlan, EachBufferCopiedAgainHasItsOwnAndTheRestSpread) {
  const std::uint64_t mib = 1 << 20;
  Trace t;
  t.processes = {"pid 1 a", "pid 2 b"};
  t.host_addresses = true;
  t.calls = {
      call(0, 3, 0, "cudaMemcpyAsync", "h2d", mib, "taken", "resident", 0x1000),
      call(0, 4, 1, "cudaMemcpyAsync", "h2d", mib, "hot", "pinned", 0x1000),
      call(0, 3, 2, "cudaMemcpyAsync", "h2d", mib, "taken", "resident", 0x1000),
      call(0, 3, 3, "cuMemcpyDtoH_v2", "d2h", mib, "taken", "resident", 0x1000),
      call(0, 3, 4, "cudaMemcpyAsync", "h2d", 2 * mib, "taken", "resident", 0x9000),
      call(0, 4, 5, "cudaMemcpyAsync", "h2d", mib, "pinned_or_managed", "pinned", 0x5000),
      call(0, 4, 6, "cudaMemcpyAsync", "h2d", mib, "pinned_or_managed", "pinned", 0x5000),
      call(0, 4, 7, "cudaMemcpy", "h2d", 4 * mib, "taken", "file_cached", 0x7000),
      call(0, 4, 8, "cudaMemcpy", "d2h", mib, "taken", "file_cached", 0x7000),
      call(0, 4, 9, "memcpy", "h2h", 8 * mib, "taken", "-", 0),
      call(0, 4, 10, "cuMemcpyBatchAsync", "h2d", mib, "taken", "-", 0x1000),
      call(1, 3, 11, "cudaMemcpyAsync", "h2d", mib, "taken", "resident", 0x1000),
  };
  replay::Plan plan = replay::plan_replay(t, 0, ~0ull >> 1);
  ASSERT_EQ(plan.buffers.size(), 1u);
  EXPECT_EQ(plan.buffers[0], mib);
  EXPECT_EQ(plan.bytes, 14 * mib);
  ASSERT_EQ(plan.threads.size(), 3u);  // process 0's threads 3 and 4, process 1's thread 3
  const auto& t3 = plan.threads[0].copies;
  ASSERT_EQ(t3.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t3[i].buffer, 0) << i;
  EXPECT_EQ(t3[3].buffer, -1);
  EXPECT_TRUE(t3[3].spread);  // 2 MiB at 0x9000, once
  EXPECT_EQ(plan.threads[0].most, 2 * mib);
  const auto& t4 = plan.threads[1].copies;
  ASSERT_EQ(t4.size(), 5u);
  EXPECT_EQ(t4[0].buffer, 0);  // from cmt's registration of the same buffer
  EXPECT_EQ(t4[0].host, "resident");
  for (int i : {1, 2, 3}) {  // the program's pinned memory, a file mapping read: not resident
    EXPECT_EQ(t4[i].buffer, -1) << i;
    EXPECT_FALSE(t4[i].spread) << i;
  }
  EXPECT_TRUE(t4[4].spread);                                  // written into resident memory, once
  EXPECT_EQ(plan.threads[1].copies[1].gap_ns, 5000u - 1500);  // from the end of its last call
  const auto& other = plan.threads[2].copies;
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].buffer, -1);  // another process's memory at the same address
  EXPECT_TRUE(other[0].spread);
  // A trace that does not say where host sides were: the thread's one buffer for all.
  t.host_addresses = false;
  plan = replay::plan_replay(t, 0, ~0ull >> 1);
  EXPECT_TRUE(plan.buffers.empty());
  for (const replay::Thread& th : plan.threads)
    for (const replay::Copy& c : th.copies) EXPECT_TRUE(c.buffer == -1 && !c.spread);
  // A window: the copies that started in [2, 4) us.
  plan = replay::plan_replay(t, 2000, 4000);
  ASSERT_EQ(plan.threads.size(), 1u);
  EXPECT_EQ(plan.threads[0].copies.size(), 2u);
  EXPECT_EQ(plan.threads[0].copies[0].gap_ns, 0u);
}

TEST(TraceFile, ItsCopiesAreWhatTuneTunesFor) {
  const std::string path = write_file(
      std::string("# cmt trace 1 pid=10 exe=/bin/a\n") + kHeader +
      "1\t2\t10\tcudaMemcpyAsync\th2d\t5000000\t0\tdisabled\tresident\t0x0\t0\n"
      "3\t4\t10\tcudaMemcpyAsync\th2d\t6000000\t6000000\ttaken\tfile_cached\t0x0\t0\n"
      "5\t6\t10\tcuMemcpyDtoH_v2\td2h\t70000\t0\tbelow_threshold\tfresh\t0x0\t0\n"
      "7\t8\t10\tcudaMemcpy\th2d\t9000000\t0\tpinned_or_managed\tpinned\t0x1\t0\n"
      "9\t10\t10\tcudaMemcpy\td2h\t1000\t0\tbelow_threshold\tresident\t0x1\t0\n"
      "11\t12\t10\tmemcpy\th2h\t9000000\t9000000\ttaken\t-\t0x0\t0\n");
  Trace t;
  std::string error;
  ASSERT_TRUE(read_trace_file(path, &t, &error)) << error;
  unlink(path.c_str());
  // Pageable host <-> device copies of 64 KiB and up, taken or not; never pinned, small or host.
  const StatsSum sum = sum_of_trace(t);
  EXPECT_EQ(sum.h2d.calls, 2u);
  EXPECT_EQ(sum.h2d.bytes, 11000000u);
  ASSERT_EQ(sum.h2d.sizes.size(), 1u);  // both in [4 MiB, 8 MiB)
  EXPECT_EQ(sum.h2d.sizes.begin()->first, 4u << 20);
  EXPECT_EQ(sum.d2h.calls, 1u);
  EXPECT_EQ(sum.d2h.sizes.begin()->first, 64u << 10);
}

TEST(TraceFile, NamesTheLineThatIsWrong) {
  Trace t;
  std::string error;
  std::string path = write_file("not a trace\n");
  EXPECT_FALSE(read_trace_file(path, &t, &error));
  EXPECT_NE(error.find(path + ":1: expected '# cmt trace 6"), std::string::npos) << error;
  unlink(path.c_str());
  path = write_file(std::string("# cmt trace 1 pid=1 exe=x\n") + kHeader + "1\t2\t3\n");
  EXPECT_FALSE(read_trace_file(path, &t, &error));
  EXPECT_NE(error.find(":3: expected 11 tab-separated fields, found 3"), std::string::npos) << error;
  unlink(path.c_str());
  path = write_file(std::string("# cmt trace 1 pid=1 exe=x\n") + kHeader +
                    "5\t2\t3\tcudaMemcpy\th2d\t10\t0\tdisabled\t-\t0x0\t0\n");
  EXPECT_FALSE(read_trace_file(path, &t, &error));
  EXPECT_NE(error.find(":3: the call ends before it starts"), std::string::npos) << error;
  unlink(path.c_str());
  path = write_file("# cmt trace 1 pid=1 exe=x\nstart end\n");
  EXPECT_FALSE(read_trace_file(path, &t, &error));
  EXPECT_NE(error.find(":2: expected the column names"), std::string::npos) << error;
  unlink(path.c_str());
  EXPECT_FALSE(read_trace_file("/nonexistent/trace", &t, &error));
  EXPECT_NE(error.find("cannot read the trace"), std::string::npos);
}

}  // namespace
}  // namespace cmt
