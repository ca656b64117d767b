// Batches of copies (interposer/batch_copy.h): which batches cmt looks into, what is left for
// CUDA once cmt has taken some copies (their attributes and indices kept), and a whole batch
// through the interposer against the fake driver, bytes checked.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/thread_context.h"
#include "fake_driver.h"
#include "interposer/batch_copy.h"
#include "interposer/interposer.h"

namespace cmt {
namespace {

constexpr std::size_t kMiB = 1 << 20;

CUmemcpyAttributes order(CUmemcpySrcAccessOrder o) {
  CUmemcpyAttributes a{};
  a.srcAccessOrder = o;
  return a;
}

// A batch over caller-owned arrays.
struct Arrays {
  std::vector<CUdeviceptr> dsts, srcs;
  std::vector<std::size_t> sizes;
  std::vector<CUmemcpyAttributes> attrs;
  std::vector<std::size_t> idxs;
  BatchCall call(CUstream stream = reinterpret_cast<CUstream>(0x1234)) {
    return BatchCall{dsts.data(),  srcs.data(), sizes.data(), sizes.size(),
                     attrs.data(), idxs.data(), attrs.size(), stream};
  }
};

Arrays six_copies() {
  Arrays a;
  for (std::size_t i = 0; i < 6; ++i) {
    a.dsts.push_back(0x100000 * (i + 1));
    a.srcs.push_back(0x9000000 + 0x100000 * i);
    a.sizes.push_back(1000 + i);
  }
  a.attrs = {order(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM), order(CU_MEMCPY_SRC_ACCESS_ORDER_ANY),
             order(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL)};
  a.idxs = {0, 2, 5};
  return a;
}

TEST(BatchCopy, LooksOnlyIntoWellFormedBatches) {
  Arrays a = six_copies();
  EXPECT_TRUE(batch_is_well_formed(a.call()));
  EXPECT_TRUE(batch_is_well_formed(a.call(CU_STREAM_PER_THREAD)));
  // The batch API refuses the legacy stream; NULL is the legacy stream except in _ptsz entries.
  EXPECT_FALSE(batch_is_well_formed(a.call(CU_STREAM_LEGACY)));
  EXPECT_FALSE(batch_is_well_formed(a.call(nullptr)));
  BatchCall per_thread = a.call(nullptr);
  per_thread.null_is_per_thread = true;
  EXPECT_TRUE(batch_is_well_formed(per_thread));
  EXPECT_EQ(batch_stream(per_thread), CU_STREAM_PER_THREAD);

  auto broken = [&](auto&& change) {
    Arrays b = six_copies();
    BatchCall c = b.call();
    change(b, c);
    return !batch_is_well_formed(c);
  };
  EXPECT_TRUE(broken([](Arrays&, BatchCall& c) { c.count = 0; }));
  EXPECT_TRUE(broken([](Arrays&, BatchCall& c) { c.srcs = nullptr; }));
  EXPECT_TRUE(broken([](Arrays&, BatchCall& c) { c.attrs_idxs = nullptr; }));
  EXPECT_TRUE(broken([](Arrays&, BatchCall& c) { c.num_attrs = 0; }));
  EXPECT_TRUE(broken([](Arrays&, BatchCall& c) { c.num_attrs = 7; }));  // more than copies
  EXPECT_TRUE(broken([](Arrays& b, BatchCall&) { b.idxs[0] = 1; }));    // must start at 0
  EXPECT_TRUE(broken([](Arrays& b, BatchCall&) { b.idxs[2] = 2; }));    // must rise
  EXPECT_TRUE(broken([](Arrays& b, BatchCall&) { b.idxs[2] = 6; }));    // under count
  EXPECT_TRUE(broken([](Arrays& b, BatchCall&) {
    b.attrs[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
  }));
  EXPECT_TRUE(broken([](Arrays& b, BatchCall&) {
    b.attrs[2].srcAccessOrder = static_cast<CUmemcpySrcAccessOrder>(4);
  }));
}

TEST(BatchCopy, LeavesCudaTheRestWithItsAttributes) {
  Arrays a = six_copies();
  BatchCall call = a.call();
  // cmt takes copies 0 and 3 whole and the first 100 bytes of copy 1.
  const std::size_t done[] = {1000, 100, 0, 1003, 0, 0};
  std::vector<bool> in_order;
  BatchRest rest;
  rest.reserve(call.count);
  std::size_t next = 0;
  split_batch(call, &rest, [&](CUdeviceptr dst, CUdeviceptr src, std::size_t n, bool ordered) {
    EXPECT_EQ(dst, a.dsts[next]);
    EXPECT_EQ(src, a.srcs[next]);
    EXPECT_EQ(n, a.sizes[next]);
    in_order.push_back(ordered);
    return done[next++];
  });
  EXPECT_EQ(in_order, (std::vector<bool>{true, true, false, false, false, false}));
  EXPECT_FALSE(rest.untouched);
  ASSERT_EQ(rest.count(), 4u);
  EXPECT_EQ(rest.index, (std::vector<std::size_t>{1, 2, 4, 5}));
  EXPECT_EQ(rest.dsts[0], a.dsts[1] + 100);
  EXPECT_EQ(rest.srcs[0], a.srcs[1] + 100);
  EXPECT_EQ(rest.sizes[0], a.sizes[1] - 100);
  EXPECT_EQ(rest.sizes[1], a.sizes[2]);
  // Copy 1 had entry 0, copies 2 and 4 entry 1 (3 was taken) and copy 5 entry 2: three entries
  // again, starting at the rest's copies 0, 1 and 3.
  EXPECT_EQ(rest.attrs_idxs, (std::vector<std::size_t>{0, 1, 3}));
  ASSERT_EQ(rest.attrs.size(), 3u);
  EXPECT_EQ(rest.attrs[0].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
  EXPECT_EQ(rest.attrs[1].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_ANY);
  EXPECT_EQ(rest.attrs[2].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
  // The rest is itself a well-formed batch.
  EXPECT_TRUE(batch_is_well_formed(rest.as_call(call)));
}

TEST(BatchCopy, NothingTakenLeavesTheBatchUntouched) {
  Arrays a = six_copies();
  a.sizes[4] = 0;  // a copy of no bytes stays CUDA's, even when every other one is taken
  BatchRest rest;
  rest.reserve(6);
  split_batch(a.call(), &rest, [](CUdeviceptr, CUdeviceptr, std::size_t, bool) { return 0; });
  EXPECT_TRUE(rest.untouched);
  BatchRest most;
  most.reserve(6);
  split_batch(a.call(), &most, [](CUdeviceptr, CUdeviceptr, std::size_t n, bool) { return n; });
  EXPECT_FALSE(most.untouched);
  EXPECT_EQ(most.index, (std::vector<std::size_t>{4}));
  EXPECT_EQ(most.attrs_idxs, (std::vector<std::size_t>{0}));
  EXPECT_EQ(most.attrs[0].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_ANY);
}

// One buffer cut into parts (each copy continuing the one before on both sides) is offered as one
// copy, in stream order if any part is; what cmt's prefix leaves goes to CUDA copy by copy.
TEST(BatchCopy, OffersOneBufferCutInPartsAsOneCopy) {
  Arrays a;
  const CUdeviceptr d = 0x100000, h = 0x7000000;
  a.sizes = {100, 200, 300, 400, 500};
  for (std::size_t i = 0, at = 0; i < 4; at += a.sizes[i], ++i) {
    a.dsts.push_back(d + at);
    a.srcs.push_back(h + at);
  }
  a.dsts.push_back(d + 5000);  // the fifth copy continues nothing
  a.srcs.push_back(h + 1000);
  a.attrs = {order(CU_MEMCPY_SRC_ACCESS_ORDER_ANY), order(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
             order(CU_MEMCPY_SRC_ACCESS_ORDER_ANY)};
  a.idxs = {0, 2, 4};
  struct Offered {
    CUdeviceptr dst, src;
    std::size_t bytes;
    bool ordered;
    bool operator==(const Offered& o) const {
      return dst == o.dst && src == o.src && bytes == o.bytes && ordered == o.ordered;
    }
  };
  std::vector<Offered> offered;
  BatchRest rest;
  rest.reserve(5);
  split_batch(a.call(), &rest, [&](CUdeviceptr dst, CUdeviceptr src, std::size_t n, bool ordered) {
    offered.push_back({dst, src, n, ordered});
    return n == 1000 ? std::size_t{350} : n;  // the run: 350 bytes of it; the fifth: all
  });
  EXPECT_EQ(offered, (std::vector<Offered>{{d, h, 1000, true}, {d + 5000, h + 1000, 500, false}}));
  // 350 bytes cover copies 0 and 1 and 50 bytes of copy 2.
  EXPECT_EQ(rest.index, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(rest.dsts[0], d + 350);
  EXPECT_EQ(rest.sizes, (std::vector<std::size_t>{250, 400}));
  EXPECT_EQ(rest.attrs_idxs, (std::vector<std::size_t>{0}));
  EXPECT_EQ(rest.attrs[0].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);

  // Declined whole (it might cross two allocations): its copies are offered one by one.
  offered.clear();
  BatchRest one_by_one;
  one_by_one.reserve(5);
  split_batch(a.call(), &one_by_one,
              [&](CUdeviceptr dst, CUdeviceptr src, std::size_t n, bool ordered) {
                offered.push_back({dst, src, n, ordered});
                return n == 1000 || n == 300 ? std::size_t{0} : n;
              });
  EXPECT_EQ(offered, (std::vector<Offered>{{d, h, 1000, true},
                                           {d, h, 100, false},
                                           {d + 100, h + 100, 200, false},
                                           {d + 300, h + 300, 300, true},
                                           {d + 600, h + 600, 400, true},
                                           {d + 5000, h + 1000, 500, false}}));
  EXPECT_FALSE(one_by_one.untouched);
  EXPECT_EQ(one_by_one.index, (std::vector<std::size_t>{2}));
  EXPECT_EQ(one_by_one.attrs[0].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
}

// Through the interposer, on the fake driver: large pageable copies both ways are taken, a small
// one and a pinned one are left for CUDA, and the taken bytes arrive.
TEST(BatchCopy, InterposerTakesPageableCopiesOfABatch) {
  fake::FakeDriver fake;
  Config config;
  config.threads = 2;
  config.chunk_bytes = 256 << 10;
  config.slots = 4;
  config.threshold = kMiB;
  config.d2h_threshold = kMiB;
  Interposer interposer(&fake.api(), config);
  CUstream stream = nullptr;
  ASSERT_EQ(fake.api().stream_create(&stream, 0), CUDA_SUCCESS);

  const std::size_t up = 3 * kMiB + 5, down = 2 * kMiB + 3;
  std::vector<unsigned char> host(up), back(down, 0), small(100, 7);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 131 + 3);
  CUdeviceptr dev = fake.alloc_device(8 * kMiB);
  void* pinned = fake.alloc_pinned(2 * kMiB);
  auto addr = [](const void* p) { return reinterpret_cast<CUdeviceptr>(p); };

  Arrays a;
  a.dsts = {dev, dev + 4 * kMiB, dev + 6 * kMiB};
  a.srcs = {addr(host.data()), addr(small.data()), addr(pinned)};
  a.sizes = {up, small.size(), 2 * kMiB};
  a.attrs = {order(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM), order(CU_MEMCPY_SRC_ACCESS_ORDER_ANY)};
  a.idxs = {0, 1};
  BatchRest rest;
  interposer.take_batch(a.call(stream), &rest);
  EXPECT_FALSE(rest.untouched);
  EXPECT_EQ(rest.index, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(rest.attrs_idxs, (std::vector<std::size_t>{0}));
  EXPECT_EQ(rest.attrs[0].srcAccessOrder, CU_MEMCPY_SRC_ACCESS_ORDER_ANY);

  // And back, in a batch of one, read any time.
  Arrays b;
  b.dsts = {addr(back.data())};
  b.srcs = {dev + 1};
  b.sizes = {down};
  b.attrs = {order(CU_MEMCPY_SRC_ACCESS_ORDER_ANY)};
  b.idxs = {0};
  BatchRest none;
  interposer.take_batch(b.call(stream), &none);
  EXPECT_FALSE(none.untouched);
  EXPECT_EQ(none.count(), 0u);
  ASSERT_EQ(fake.api().stream_synchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(0, std::memcmp(back.data(), host.data() + 1, down));

  const std::string json = interposer.stats().to_json();
  EXPECT_NE(json.find("\"taken_via\": {\"runtime\": 0, \"driver\": 0, \"batch\": 2}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"below_threshold\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"pinned_or_managed\": 1"), std::string::npos) << json;

  // Three copies up, none continuing another, sources read in stream order: cmt waits for the
  // stream once, before the first; the batch's own copies have no order among them.
  Arrays three;
  for (std::size_t i = 0; i < 3; ++i) {
    three.dsts.push_back(dev + (2 - i) * 2 * kMiB);
    three.srcs.push_back(addr(host.data() + i * kMiB));
    three.sizes.push_back(kMiB + i);
  }
  three.attrs = {order(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
  three.idxs = {0};
  const long syncs = fake.syncs.load();
  BatchRest three_rest;
  interposer.take_batch(three.call(stream), &three_rest);
  EXPECT_EQ(three_rest.count(), 0u);
  EXPECT_EQ(fake.syncs.load() - syncs, 1);
  ASSERT_EQ(fake.api().stream_synchronize(stream), CUDA_SUCCESS);
  for (std::size_t i = 0; i < 3; ++i)  // the fake's device memory is host memory
    EXPECT_EQ(0, std::memcmp(reinterpret_cast<const void*>(three.dsts[i]), host.data() + i * kMiB,
                             three.sizes[i]))
        << i;

  // A batch of small copies, together under the smallest copy cmt takes: CUDA's after a look at
  // their sizes, nothing asked of the driver.
  Arrays tiny;
  for (int i = 0; i < 8; ++i) {
    tiny.dsts.push_back(dev + 4096 * i);
    tiny.srcs.push_back(addr(host.data() + 8192 * i));  // not continuing each other
    tiny.sizes.push_back(1000);
  }
  tiny.attrs = {order(CU_MEMCPY_SRC_ACCESS_ORDER_ANY)};
  tiny.idxs = {0};
  const long queries = fake.pointer_queries.load();
  BatchRest small_rest;
  interposer.take_batch(tiny.call(stream), &small_rest);
  EXPECT_TRUE(small_rest.untouched);
  EXPECT_EQ(fake.pointer_queries.load(), queries);
  EXPECT_NE(interposer.stats().to_json().find("\"below_threshold\": 9"), std::string::npos)
      << interposer.stats().to_json();

  // A thread that opted out: the whole batch is CUDA's, untouched.
  const bool was = t_thread.opted_out;
  t_thread.opted_out = true;
  BatchRest forwarded;
  interposer.take_batch(a.call(stream), &forwarded);
  t_thread.opted_out = was;
  EXPECT_TRUE(forwarded.untouched);
}

}  // namespace
}  // namespace cmt
