// GPU-to-GPU copies through the host against the fake driver with two (or three) GPUs: the pieces,
// the bytes (the fake's streams run late and out of step, so a missing event wait shows up as
// wrong bytes), stream order on both sides, many threads at once, a driver failure midway, and
// which copies are taken at all.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "engine/peer/peer_copier.h"
#include "fake_driver.h"
#include "interposer/classify.h"
#include "interposer/interposer.h"

namespace cmt {
namespace {

constexpr std::size_t kKiB = std::size_t{1} << 10, kMiB = std::size_t{1} << 20;

std::vector<char> pattern(std::size_t n, unsigned seed) {
  std::vector<char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 7919) >> 3);
  return v;
}

char* host_view(CUdeviceptr p) {
  return reinterpret_cast<char*>(p);  // the fake's device memory is host memory
}

// A copy request from `src` on GPU 1 to `dst` on GPU 0 (or the other way), ordered on `stream`.
PeerRequest request(CUdeviceptr dst, int dst_gpu, CUdeviceptr src, int src_gpu, std::size_t n,
                    CUstream stream, CUcontext stream_ctx, bool synchronous = false) {
  PeerRequest r;
  r.dst = dst;
  r.src = src;
  r.dst_ctx = fake::fake_context(dst_gpu);
  r.src_ctx = fake::fake_context(src_gpu);
  r.bytes = n;
  r.stream = stream;
  r.stream_ctx = stream_ctx;
  r.synchronous = synchronous;
  return r;
}

TEST(PeerCopier, PiecesGrowThenShrinkAndCoverTheCopy) {
  for (std::size_t n : {std::size_t{1}, 4 * kKiB + 3, 300 * kKiB, kMiB, 7 * kMiB + 1,
                        64 * kMiB, (std::size_t{1} << 30) + 7}) {
    std::vector<std::size_t> pieces;
    for (std::size_t off = 0; off < n;) {
      const std::size_t p = PeerCopier::piece_bytes(pieces.size(), n - off);
      ASSERT_GT(p, 0u);
      ASSERT_LE(p, PeerCopier::kSlotBytes);
      pieces.push_back(p);
      off += p;
    }
    EXPECT_EQ(std::accumulate(pieces.begin(), pieces.end(), std::size_t{0}), n);
    EXPECT_EQ(pieces.front(), std::min(n, PeerCopier::kFirstPiece)) << n;
    if (n == kMiB) {
      EXPECT_EQ(pieces, (std::vector<std::size_t>{kMiB / 2, kMiB / 2}));  // two halves
    }
    if (n >= 64 * kMiB) {
      EXPECT_EQ(pieces[1], 2 * PeerCopier::kFirstPiece);  // growing from the start...
      EXPECT_LE(pieces.back(), PeerCopier::kFirstPiece);   // ...and short again at the end
      EXPECT_EQ(*std::max_element(pieces.begin(), pieces.end()), PeerCopier::kSlotBytes);
    }
  }
}

TEST(PeerCopier, AnOddShapeIsMadeUsable) {
  fake::FakeDriver fake;
  fake.devices = 2;
  // A first piece larger than a slot, one slot: no piece may pass a slot.
  PeerCopier copier(fake.api(), {1, 64 * kKiB, 4 * kMiB});
  const std::size_t n = 3 * kMiB + 1;
  CUdeviceptr src = fake.alloc_device(n, 1), dst = fake.alloc_device(n, 0);
  const std::vector<char> want = pattern(n, 9);
  std::memcpy(host_view(src), want.data(), n);
  CUstream stream = fake.create_stream();
  ASSERT_EQ(copier.copy(request(dst, 0, src, 1, n, stream, fake::fake_context(0))).bytes_done, n);
  ASSERT_EQ(fake.api().stream_synchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(0, std::memcmp(host_view(dst), want.data(), n));
}

TEST(PeerCopier, CopiesEveryByteBetweenTwoGpusOnAStream) {
  fake::FakeDriver fake(40);
  fake.devices = 2;
  PeerCopier copier(fake.api());
  const std::size_t cap = 37 * kMiB + 4096;
  CUdeviceptr on0 = fake.alloc_device(cap, 0), on1 = fake.alloc_device(cap, 1);
  CUstream stream = fake.create_stream();  // GPU 0's
  unsigned seed = 1;
  // Odd sizes and offsets, both ways; the stream is GPU 0's, the destination's or the source's.
  for (std::size_t n : {std::size_t{1}, std::size_t{4097}, 256 * kKiB + 1, kMiB + 3, 37 * kMiB + 5}) {
    for (int way = 0; way < 2; ++way) {
      const std::size_t off = (seed * 4099) % 4096;
      if (off + n > cap) continue;
      CUdeviceptr src = (way ? on0 : on1) + off, dst = (way ? on1 : on0) + (4096 - off) % 4096;
      const std::vector<char> want = pattern(n, ++seed);
      std::memcpy(host_view(src), want.data(), n);
      PeerOutcome out = copier.copy(
          request(dst, way ? 1 : 0, src, way ? 0 : 1, n, stream, fake::fake_context(0)));
      ASSERT_EQ(out.bytes_done, n);
      ASSERT_EQ(fake.api().stream_synchronize(stream), CUDA_SUCCESS);
      ASSERT_EQ(0, std::memcmp(host_view(dst), want.data(), n)) << n << " bytes, way " << way;
    }
  }
  EXPECT_GT(fake.waits.load(), 0);
}

TEST(PeerCopier, LanesStayUnderThePinnedLimit) {
  fake::FakeDriver fake;
  fake.devices = 3;
  const PeerShape shape{2, kMiB, 256 * kKiB};
  PinnedBudget budget(2 * 2 * kMiB);  // room for two lanes' slots
  PeerCopier copier(fake.api(), shape, budget);
  const std::size_t n = 3 * kMiB + 1;
  CUdeviceptr on0 = fake.alloc_device(n, 0), on1 = fake.alloc_device(n, 1),
              on2 = fake.alloc_device(n, 2);
  CUstream stream = fake.create_stream();  // GPU 0's
  const std::vector<char> want = pattern(n, 5);
  std::memcpy(host_view(on1), want.data(), n);
  std::memcpy(host_view(on2), want.data(), n);
  auto copy = [&](CUdeviceptr dst, int to, CUdeviceptr src, int from) {
    PeerOutcome out = copier.copy(request(dst, to, src, from, n, stream, fake::fake_context(0)));
    EXPECT_EQ(fake.api().stream_synchronize(stream), CUDA_SUCCESS);
    return out;
  };
  EXPECT_EQ(copy(on0, 0, on1, 1).bytes_done, n);  // lane 1 -> 0
  EXPECT_EQ(copy(on0, 0, on2, 2).bytes_done, n);  // lane 2 -> 0
  PeerOutcome third = copy(on1, 1, on0, 0);       // lane 0 -> 1: past the limit, left to CUDA
  EXPECT_EQ(third.bytes_done, 0u);
  EXPECT_EQ(third.status, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(copy(on0, 0, on1, 1).bytes_done, n);  // the lanes built still copy
  EXPECT_EQ(0, std::memcmp(host_view(on0), want.data(), n));
}

TEST(PeerCopier, KeepsStreamOrderOnBothSides) {
  fake::FakeDriver fake(60);
  fake.devices = 2;
  PeerCopier copier(fake.api());
  const std::size_t n = 9 * kMiB + 17;
  CUdeviceptr src = fake.alloc_device(n, 1), dst = fake.alloc_device(n, 0);
  CUstream stream = fake.create_stream();
  std::vector<char> old_bytes = pattern(n, 3), new_bytes = pattern(n, 4), seen(n);
  std::memcpy(host_view(src), old_bytes.data(), n);
  for (int round = 0; round < 3; ++round) {
    // Queued before the copy: the source gets new bytes; after it: the destination is read.
    fake.run_copy(stream, host_view(src), new_bytes.data(), n, false);
    ASSERT_EQ(copier.copy(request(dst, 0, src, 1, n, stream, fake::fake_context(0))).bytes_done, n);
    fake.run_copy(stream, seen.data(), host_view(dst), n, false);
    ASSERT_EQ(fake.api().stream_synchronize(stream), CUDA_SUCCESS);
    ASSERT_EQ(0, std::memcmp(seen.data(), new_bytes.data(), n)) << "round " << round;
    std::swap(old_bytes, new_bytes);
  }
}

TEST(PeerCopier, ASynchronousCopyHasFinishedOnReturn) {
  fake::FakeDriver fake(40);
  fake.devices = 2;
  PeerCopier copier(fake.api());
  const std::size_t n = 5 * kMiB + 1;
  CUdeviceptr src = fake.alloc_device(n, 0), dst = fake.alloc_device(n, 1);
  const std::vector<char> want = pattern(n, 5);
  // Queued on GPU 0's legacy stream before the copy, which must wait for it.
  fake.run_copy(CU_STREAM_LEGACY, host_view(src), want.data(), n, false);
  PeerOutcome out = copier.copy(
      request(dst, 1, src, 0, n, CU_STREAM_LEGACY, fake::fake_context(0), /*synchronous=*/true));
  ASSERT_EQ(out.bytes_done, n);
  EXPECT_EQ(0, std::memcmp(host_view(dst), want.data(), n));
}

TEST(PeerCopier, ManyThreadsBothWaysAtOnce) {
  fake::FakeDriver fake(20);
  fake.devices = 2;
  PeerCopier copier(fake.api());
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<int> bad(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int from = t % 2, to = 1 - from;
      const std::size_t n = (t + 1) * 700 * kKiB + t;
      CUdeviceptr src = fake.alloc_device(n, from), dst = fake.alloc_device(n, to);
      CUstream stream = fake.create_stream();
      for (int round = 0; round < 4; ++round) {
        const std::vector<char> want = pattern(n, 100 * t + round);
        std::memcpy(host_view(src), want.data(), n);
        // The stream is GPU 0's: the source's for half the threads, the destination's for the rest.
        if (copier.copy(request(dst, to, src, from, n, stream, fake::fake_context(0))).bytes_done !=
                n ||
            fake.api().stream_synchronize(stream) != CUDA_SUCCESS ||
            std::memcmp(host_view(dst), want.data(), n) != 0)
          ++bad[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

TEST(PeerCopier, AFailedDmaStopsAtAPieceAndTheRestIsLeftToCuda) {
  fake::FakeDriver fake(30);
  fake.devices = 2;
  PeerCopier copier(fake.api());
  const std::size_t n = 20 * kMiB + 9;
  CUdeviceptr src = fake.alloc_device(n, 1), dst = fake.alloc_device(n, 0);
  const std::vector<char> want = pattern(n, 6);
  std::memcpy(host_view(src), want.data(), n);
  CUstream stream = fake.create_stream();
  fake.faults.dma_fail_at = 7;  // the fourth piece's H2D
  PeerOutcome out = copier.copy(request(dst, 0, src, 1, n, stream, fake::fake_context(0)));
  EXPECT_EQ(out.status, fake.faults.dma_fail_code);
  ASSERT_GT(out.bytes_done, 0u);
  ASSERT_LT(out.bytes_done, n);
  // The prefix is complete when the copier returns; the hook forwards the rest ("CUDA" here).
  EXPECT_EQ(0, std::memcmp(host_view(dst), want.data(), out.bytes_done));
  std::memcpy(host_view(dst) + out.bytes_done, want.data() + out.bytes_done, n - out.bytes_done);
  fake.faults.dma_fail_at = -1;
  // The next copy gets a new lane and succeeds.
  const std::vector<char> again = pattern(n, 7);
  std::memcpy(host_view(src), again.data(), n);
  ASSERT_EQ(copier.copy(request(dst, 0, src, 1, n, stream, fake::fake_context(0))).bytes_done, n);
  ASSERT_EQ(fake.api().stream_synchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(0, std::memcmp(host_view(dst), again.data(), n));
}

// A context that ends (cuCtxDestroy, cudaDeviceReset) takes the lanes that name it along: their
// pinned slots given back, their handles freed in the contexts that live and never passed to CUDA
// once their own context has ended (the fake counts any such call), and copies after it build
// lanes anew, byte-exact, however often contexts end.
TEST(PeerCopier, LanesOfAContextThatEndsAreFreed) {
  fake::FakeDriver fake(10);
  fake.devices = 2;
  const PeerShape shape{2, kMiB, 256 * kKiB};
  PinnedBudget budget(4 * 2 * kMiB);  // room for four lanes' slots: a leak would show by round 3
  PeerCopier copier(fake.api(), shape, budget);
  const std::size_t n = 3 * kMiB + 11;
  CUdeviceptr on0 = fake.alloc_device(n, 0), on1 = fake.alloc_device(n, 1);
  CUstream stream = fake.create_stream();  // GPU 0's
  for (int end = 0; end < 12; ++end) {
    SCOPED_TRACE(end);
    const bool alive = end % 2 == 0;
    const CUcontext ctx = fake::fake_context((end / 2) % 2);
    for (int way = 0; way < 2; ++way) {
      const std::vector<char> want = pattern(n, 10 * end + way);
      std::memcpy(host_view(way ? on0 : on1), want.data(), n);
      const PeerOutcome out =
          copier.copy(way ? request(on1, 1, on0, 0, n, stream, fake::fake_context(0))
                          : request(on0, 0, on1, 1, n, stream, fake::fake_context(0)));
      ASSERT_EQ(out.bytes_done, n);
      ASSERT_EQ(fake.api().stream_synchronize(stream), CUDA_SUCCESS);
      ASSERT_EQ(0, std::memcmp(host_view(way ? on1 : on0), want.data(), n));
    }
    ASSERT_EQ(budget.taken(), 2 * 2 * kMiB);
    const std::size_t events = fake.destroyed_event_count();
    const long streams = fake.streams_destroyed.load();
    if (!alive) fake.end_context(ctx);  // the driver destroyed it, and a new one took its handle
    EXPECT_EQ(copier.forget_context(ctx, alive), 2u);
    EXPECT_EQ(budget.taken(), 0u);
    // Alive: each lane's two slot events (source) and two `freed` events (destination), and
    // both its streams. Ended: only those of the other context.
    EXPECT_EQ(fake.destroyed_event_count() - events, alive ? 8u : 4u);
    EXPECT_EQ(fake.streams_destroyed.load() - streams, alive ? 4 : 2);
    EXPECT_EQ(fake.dead_handle_calls.load(), 0);
  }
  EXPECT_EQ(copier.forget_context(fake::fake_context(0), true), 0u);
}

// A lane a copy holds when its context ends is leaked, its slots counted still: the copy may
// enqueue on its handles to its end. The copy completes, and the next one gets a new lane.
TEST(PeerCopier, ALaneInUseWhenItsContextEndsIsLeaked) {
  fake::FakeDriver fake(10);
  fake.devices = 2;
  const PeerShape shape{2, kMiB, 256 * kKiB};
  PinnedBudget budget(4 * 2 * kMiB);
  PeerCopier copier(fake.api(), shape, budget);
  const std::size_t n = 6 * kMiB + 3;
  CUdeviceptr src = fake.alloc_device(n, 1), dst = fake.alloc_device(n, 0);
  const std::vector<char> want = pattern(n, 8);
  std::memcpy(host_view(src), want.data(), n);
  fake.pause_streams(true);
  const long syncs = fake.syncs.load();
  std::thread copying([&] {  // synchronous: it holds the lane until its last piece has landed
    EXPECT_EQ(copier.copy(request(dst, 0, src, 1, n, CU_STREAM_LEGACY, fake::fake_context(0), true))
                  .bytes_done,
              n);
  });
  // Its first cuStreamSynchronize is the wait for its last piece: every piece is enqueued on the
  // lane by then (a copy that found its lane broken before that would build another).
  while (fake.syncs.load() == syncs) std::this_thread::yield();
  EXPECT_EQ(copier.forget_context(fake::fake_context(1), true), 1u);
  fake.pause_streams(false);
  copying.join();
  EXPECT_EQ(0, std::memcmp(host_view(dst), want.data(), n));
  EXPECT_EQ(budget.taken(), 2 * kMiB);  // leaked, and counted
  CUstream stream = fake.create_stream();
  ASSERT_EQ(copier.copy(request(dst, 0, src, 1, n, stream, fake::fake_context(0))).bytes_done, n);
  ASSERT_EQ(fake.api().stream_synchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(budget.taken(), 2 * 2 * kMiB);
}

TEST(ClassifyPeer, TakesTwoGpusWithoutPeerAccessAndForwardsTheRest) {
  fake::FakeDriver fake;
  fake.devices = 3;
  CUdeviceptr a0 = fake.alloc_device(4 * kMiB, 0), b0 = fake.alloc_device(4 * kMiB, 0);
  CUdeviceptr a1 = fake.alloc_device(4 * kMiB, 1);
  std::vector<char> host(4 * kMiB);
  auto call = [&](CUdeviceptr dst, CUdeviceptr src, std::size_t n) {
    PeerCall c;
    c.dst = dst;
    c.src = src;
    c.bytes = n;
    return c;
  };
  auto why = [&](const PeerCall& c) { return classify_peer_copy(fake.api(), c, kMiB).reason; };

  PeerDecision d = classify_peer_copy(fake.api(), call(a1, a0, 2 * kMiB), kMiB);
  ASSERT_TRUE(d.taken());
  EXPECT_EQ(d.request.src_ctx, fake::fake_context(0));
  EXPECT_EQ(d.request.dst_ctx, fake::fake_context(1));
  EXPECT_EQ(d.request.stream_ctx, fake::fake_context(0));  // the caller's: GPU 0's legacy stream

  EXPECT_EQ(why(call(a1, a0, kMiB - 1)), ForwardReason::BelowThreshold);
  EXPECT_EQ(why(call(b0, a0, kMiB)), ForwardReason::SameGpu);
  EXPECT_EQ(why(call(reinterpret_cast<CUdeviceptr>(host.data()), a0, kMiB)),
            ForwardReason::NotGpuToGpu);
  EXPECT_EQ(why(call(a1 + kMiB, a0, 3 * kMiB + 1)), ForwardReason::OutOfRange);
  PeerCall named = call(a1, a0, kMiB);
  named.dst_device = 2;  // cudaMemcpyPeer naming another device than the pointer's
  EXPECT_EQ(why(named), ForwardReason::OtherDevice);
  named.dst_device = 1;
  named.src_device = 0;
  EXPECT_TRUE(classify_peer_copy(fake.api(), named, kMiB).taken());

  // A stream of a third GPU's context cannot be ordered with the copy's events.
  CUstream third = nullptr;
  {
    ScopedContext in(fake.api(), fake::fake_context(2));
    ASSERT_EQ(fake.api().stream_create(&third, 0), CUDA_SUCCESS);
  }
  PeerCall async = call(a1, a0, kMiB);
  async.stream = third;
  EXPECT_EQ(why(async), ForwardReason::OtherContextStream);
  async.synchronous = true;
  async.stream = CU_STREAM_LEGACY;
  EXPECT_TRUE(classify_peer_copy(fake.api(), async, kMiB).taken());

  // Peer access either way: CUDA's direct copy.
  fake.peer_access[1][0] = true;
  EXPECT_EQ(why(call(a1, a0, kMiB)), ForwardReason::PeerAccess);
  fake.peer_access[1][0] = false;
  fake.peer_access[0][1] = true;
  EXPECT_EQ(why(call(a1, a0, kMiB)), ForwardReason::PeerAccess);
  // Should a driver's access flags not show it, the device-address query still does.
  fake.access_flags_blind = true;
  EXPECT_EQ(why(call(a1, a0, kMiB)), ForwardReason::PeerAccess);
  fake.peer_access[0][1] = false;
  EXPECT_TRUE(classify_peer_copy(fake.api(), call(a1, a0, kMiB), kMiB).taken());
  fake.access_flags_blind = false;

  fake.faults.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  EXPECT_EQ(why(call(a1, a0, kMiB)), ForwardReason::Capturing);
  fake.faults.capture = CU_STREAM_CAPTURE_STATUS_NONE;

  CUcontext ctx = nullptr;  // classification leaves the caller's context current
  ASSERT_EQ(fake.api().ctx_get_current(&ctx), CUDA_SUCCESS);
  EXPECT_EQ(ctx, fake::fake_context(0));
}

TEST(InterposerPeer, DeviceToDeviceCopiesBetweenGpusGoThroughTheHost) {
  fake::FakeDriver fake(20);
  fake.devices = 2;
  Config config;
  Interposer interposer(&fake.api(), config);
  const std::size_t n = 3 * kMiB + 5;
  CUdeviceptr src = fake.alloc_device(n, 1), dst = fake.alloc_device(n, 0);
  CUdeviceptr same = fake.alloc_device(n, 0);
  const std::vector<char> want = pattern(n, 8);
  std::memcpy(host_view(src), want.data(), n);
  auto* d = reinterpret_cast<void*>(dst);
  auto* s = reinterpret_cast<void*>(src);
  // cudaMemcpy(..., cudaMemcpyDeviceToDevice): synchronous, taken, the bytes there on return.
  EXPECT_EQ(interposer.take_copy(d, s, n, kDeviceToDevice, CU_STREAM_LEGACY, true, Entry::Runtime),
            n);
  EXPECT_EQ(0, std::memcmp(host_view(dst), want.data(), n));
  // cuMemcpyAsync (unified addressing): found to be device to device, taken too.
  EXPECT_EQ(interposer.take_copy(d, s, n, kDefault, CU_STREAM_LEGACY, false, Entry::Driver), n);
  // Within one GPU: CUDA's.
  EXPECT_EQ(interposer.take_copy(reinterpret_cast<void*>(same), d, n, kDeviceToDevice,
                                CU_STREAM_LEGACY, false, Entry::Runtime),
            0u);
  fake.synchronize_all();
  const std::string json = interposer.stats().to_json();
  EXPECT_NE(json.find("\"gpu_to_gpu\": {\"calls\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"same_gpu\": 1"), std::string::npos) << json;

  // peer off: every such copy is CUDA's.
  config.peer = false;
  Interposer off(&fake.api(), config);
  EXPECT_EQ(off.take_copy(d, s, n, kDeviceToDevice, CU_STREAM_LEGACY, true, Entry::Runtime), 0u);
}

TEST(InterposerPeer, WithOneGpuDeviceToDeviceCopiesCostNoPointerQueries) {
  fake::FakeDriver fake;
  Interposer interposer(&fake.api(), Config{});
  const std::size_t n = 4 * kMiB;
  auto* a = reinterpret_cast<void*>(fake.alloc_device(n));
  auto* b = reinterpret_cast<void*>(fake.alloc_device(n));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(interposer.take_copy(a, b, n, kDeviceToDevice, CU_STREAM_LEGACY, false, Entry::Runtime),
              0u);
  EXPECT_EQ(fake.pointer_queries.load(), 0);
  EXPECT_NE(interposer.stats().to_json().find("\"same_gpu\": 3"), std::string::npos);
}

}  // namespace
}  // namespace cmt
