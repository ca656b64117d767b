// What registering a hot buffer costs and what a copy from a registration takes, as this process
// has measured them (from priors until it has), for register = auto (register_cache.h): there a
// range is registered once the time its copies lost against copies from a registration reaches
// what registering it is expected to cost. That is the ski-rental rule: a buffer copied only a few
// times never loses more than about what its copies took anyway (register = hot, at the second
// copy, lost up to 3x on buffers copied 2-10 times, bench/lab/NOTES.md 69), and one copied again
// and again is registered after a few copies and gains from then on.
//
// A copy that is not made from a registration is weighed by what such copies of its size and
// direction took on their streams, from the stream reaching them to their last DMA's end
// (stream_timer.h times some of them): a call's own time says too little, as a cudaMemcpyAsync
// from pageable memory returns, staged by cmt or by CUDA, before its last DMA ends (NOTES.md 78).
//
// Thread-safe; the estimates are updated with relaxed atomics, so two measurements at once may
// lose one of them, which an estimate can afford.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace cmt {

class RegisterCosts {
 public:
  // Priors, from measurements on the H100 and H200 machines (NOTES.md 69 and 74; the issue's
  // 0.46 ms at 256 KiB to 3.0 ms at 64 MiB): cuMemHostRegister about 0.15 ms plus 0.05 ms a MiB;
  // a copy from registered memory about 8 us plus the bytes at 50 GB/s (their PCIe 5 links read
  // 51-54 GB/s pinned). Not a slower link's rate: cmt's staging beats it at 16-64 MiB (37-41 GB/s
  // on the H100), so no copy would show a loss, nothing would be registered, and the rate would
  // never be measured (NOTES.md 78, with 25 GB/s). On a slower link a loss is overestimated at
  // first, which registers sooner, bounded by the rule, until a registered copy says the rate.
  static constexpr double kRegisterFixedNs = 150e3;
  static constexpr double kRegisterNsPerByte = 50e3 / (1 << 20);
  static constexpr double kHotLatencyNs = 8e3;
  static constexpr double kHotBytesPerNs = 50.0;
  // Of the copies not made from a registration, each size's (power of two) and direction's first
  // kFirstTimed are timed on their streams, then one in kTimeEvery.
  static constexpr unsigned kFirstTimed = 4;
  static constexpr unsigned kTimeEvery = 8;
  // A copy's counted loss at most this many times a copy from a registration: CUDA's own path, the
  // slowest, took 2.5-4.2x a pinned copy's time (issue 33's table), and a copy's time may also
  // hold a wait for the stream's earlier work (a kernel), which a copy from a registration would
  // wait for too.
  static constexpr double kMostLossTimes = 4.0;

  // What registering `bytes` is expected to take, in ns.
  double register_ns(std::size_t bytes) const;
  // What a copy of `bytes` from a registration is expected to take, call to return, in ns.
  double hot_copy_ns(std::size_t bytes) const;
  // What a copy of `bytes` that took `call_ns` lost against one from a registration: 0 to
  // kMostLossTimes times the latter.
  double lost_ns(std::size_t bytes, std::uint64_t call_ns) const;

  // Whether the copy of `bytes` about to be made, from a registration (`hot`) or not, is one to
  // time on its stream. Both kinds are timed alike, so that what one loses against the other is
  // measured the same way on both sides.
  bool time_this(bool to_device, std::size_t bytes, bool hot = false);
  // A copy of `bytes` not made from a registration took `ns` on its stream.
  void staged_timed(bool to_device, std::size_t bytes, std::uint64_t ns);
  // What a copy of `bytes` not made from a registration is expected to lose against one that is,
  // from the timed copies of its size and direction (0 to kMostLossTimes times the latter); below
  // 0 while none of them is timed.
  double expected_loss_ns(bool to_device, std::size_t bytes) const;
  // How many copies not made from a registration were timed.
  std::uint64_t timed_copies() const { return timed_.load(std::memory_order_relaxed); }

  // A registration of `bytes` took `ns`.
  void registered(std::size_t bytes, std::uint64_t ns);
  // A copy of `bytes` from a registration took `ns` (on its stream, under auto): small ones say
  // the latency, large ones the link's rate.
  void hot_copied(std::size_t bytes, std::uint64_t ns);

 private:
  std::atomic<double> register_scale_{1.0};  // measured registrations over the prior's
  std::atomic<double> latency_ns_{kHotLatencyNs};
  std::atomic<double> bytes_per_ns_{kHotBytesPerNs};
  // By direction (0: to the device) and size (log2 of the bytes): copies seen so far, not made
  // from a registration ([0]) and made from one ([1]), and the former's timed ns a byte (0: none
  // timed).
  static constexpr int kSizes = 64;
  std::atomic<std::uint32_t> seen_[2][2][kSizes] = {};
  std::atomic<double> staged_ns_per_byte_[2][kSizes] = {};
  std::atomic<std::uint64_t> timed_{0};
};

}  // namespace cmt
