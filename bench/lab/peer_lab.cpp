// cmt-lab-peer: the GPU-to-GPU path through the host, on a machine with one GPU. A second context
// on the same GPU stands in for a second GPU (its own streams, its own memory); this measures
//   - what CU_POINTER_ATTRIBUTE_ACCESS_FLAGS answers across the two contexts (on the H200: read-
//     write both ways, as contexts of one GPU reach each other's memory; peer access between
//     them is unsupported, so it is not asked for);
//   - cuMemcpyPeer between them, CUDA's own (a copy within the GPU);
//   - cmt's PeerCopier (engine/peer/peer_copier.h) between them, synchronous copies;
//   - pinned D2H and H2D alone, the two legs' limits;
// by size, median of rounds, bytes checked once per mode. Both legs share one GPU's link here, so
// the figures show the pipeline and what CUDA does between contexts, not what two GPUs get.
//
// With --shapes SLOTSxSLOT/FIRST,... (e.g. 4x16M/256K,8x8M/1M) cmt's column is repeated for each
// lane shape, the first being the built-in one.
//
// With --calls it measures instead where a short copy's time goes: what each driver call of a
// piece costs the CPU, and how long a two-leg chain (D2H in one context, H2D of the same bytes in
// the other) takes from its first call to its end, with the legs ordered by an event or by a
// stream memory operation on a pinned flag.
//
// usage: cmt-lab-peer [--sizes 1M,16M,1G] [--rounds 3] [--shapes 4x16M/256K,...] [--calls]
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/byte_size.h"
#include "cuda/driver_api.h"
#include "engine/peer/peer_copier.h"

namespace {

using Clock = std::chrono::steady_clock;

#define CHECK(call)                                                                  \
  do {                                                                               \
    CUresult r_ = (call);                                                            \
    if (r_ != CUDA_SUCCESS) {                                                        \
      const char* n_ = nullptr;                                                      \
      cuGetErrorName(r_, &n_);                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, n_ ? n_ : "?"); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

unsigned access_flags(CUcontext viewer, CUdeviceptr p) {
  CHECK(cuCtxSetCurrent(viewer));
  unsigned flags = 99;
  CHECK(cuPointerGetAttribute(&flags, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p));
  return flags;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}


// A copy of n bytes from src (context a) to dst (context b), ordered on `stream` (a's).
cmt::PeerRequest a_to_b(CUdeviceptr dst, CUcontext b, CUdeviceptr src, CUcontext a, std::size_t n,
                        CUstream stream, bool synchronous) {
  cmt::PeerRequest r;
  r.dst = dst;
  r.dst_ctx = b;
  r.src = src;
  r.src_ctx = a;
  r.bytes = n;
  r.stream = stream;
  r.stream_ctx = a;
  r.synchronous = synchronous;
  return r;
}

// Microseconds, median over `reps`, of one call of `body` (timed alone).
template <class Body>
double call_us(int reps, Body&& body) {
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    body(i);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return median(us);
}

// --calls: the CPU cost of each call a piece makes, then the chain's latency. A is the source
// context (src, a stream sa), B the destination (dst, sb); `pinned` is the staging memory.
void measure_calls(CUcontext a, CUcontext b, CUdeviceptr src, CUdeviceptr dst, void* pinned,
                   const std::vector<std::unique_ptr<cmt::PeerCopier>>& copiers,
                   const std::vector<std::string>& shape_names) {
  const int reps = 400;
  CUstream sa = nullptr, sb = nullptr;
  CHECK(cuCtxSetCurrent(b));
  CHECK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
  CHECK(cuCtxSetCurrent(a));
  CHECK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
  CUevent ea = nullptr;
  CHECK(cuEventCreate(&ea, CU_EVENT_DISABLE_TIMING));
  // A pinned word both contexts can reach, for the stream memory operations.
  void* flag_host = nullptr;
  CHECK(cuMemHostAlloc(&flag_host, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  auto* flag = static_cast<volatile unsigned*>(flag_host);
  *flag = 0;
  CUdeviceptr flag_a = 0, flag_b = 0;
  CHECK(cuMemHostGetDevicePointer(&flag_a, flag_host, 0));
  CHECK(cuCtxSetCurrent(b));
  CHECK(cuMemHostGetDevicePointer(&flag_b, flag_host, 0));
  CHECK(cuCtxSetCurrent(a));
  const std::size_t piece = 256 << 10;
  // Drains the queues every 32 calls (untimed), so that no call waits for room. A stream is
  // synchronized from either context, so the current one stays.
  auto drain = [&](int i) {
    if (i % 32 != 31) return;
    CHECK(cuStreamSynchronize(sb));
    CHECK(cuStreamSynchronize(sa));
  };
  struct Row {
    const char* name;
    double us;
  };
  std::vector<Row> rows;
  rows.push_back({"cuCtxGetCurrent", call_us(reps, [&](int) {
                    CUcontext c;
                    CHECK(cuCtxGetCurrent(&c));
                  })});
  rows.push_back({"cuCtxSetCurrent (to B and back to A, each)", call_us(reps, [&](int) {
                    CHECK(cuCtxSetCurrent(b));
                    CHECK(cuCtxSetCurrent(a));
                  }) / 2});
  rows.push_back({"cuMemcpyDtoHAsync 256 KiB into pinned", call_us(reps, [&](int i) {
                    CHECK(cuMemcpyDtoHAsync(pinned, src, piece, sa));
                    drain(i);
                  })});
  CHECK(cuCtxSetCurrent(b));
  rows.push_back({"cuMemcpyHtoDAsync 256 KiB from pinned (in B)", call_us(reps, [&](int i) {
                    CHECK(cuMemcpyHtoDAsync(dst, pinned, piece, sb));
                    drain(i);
                  })});
  CHECK(cuCtxSetCurrent(a));
  rows.push_back({"cuEventRecord", call_us(reps, [&](int) { CHECK(cuEventRecord(ea, sa)); })});
  rows.push_back({"cuStreamWaitEvent, the event in the same context", call_us(reps, [&](int i) {
                    CHECK(cuStreamWaitEvent(sa, ea, 0));
                    drain(i);
                  })});
  CHECK(cuCtxSetCurrent(b));
  rows.push_back({"cuStreamWaitEvent, the event in the other context", call_us(reps, [&](int i) {
                    CHECK(cuStreamWaitEvent(sb, ea, 0));
                    drain(i);
                  })});
  CHECK(cuCtxSetCurrent(a));
  rows.push_back({"cuEventCreate + cuEventDestroy", call_us(reps, [&](int) {
                    CUevent e;
                    CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
                    CHECK(cuEventDestroy(e));
                  })});
  CUresult memops = cuStreamWriteValue32(sa, flag_a, 0, 0);
  if (memops == CUDA_SUCCESS) {
    rows.push_back({"cuStreamWriteValue32 (pinned flag)", call_us(reps, [&](int i) {
                      CHECK(cuStreamWriteValue32(sa, flag_a, static_cast<unsigned>(i), 0));
                      drain(i);
                    })});
    CHECK(cuStreamSynchronize(sa));
    *flag = 0;
    CHECK(cuCtxSetCurrent(b));
    rows.push_back({"cuStreamWaitValue32 GEQ (already met, in B)", call_us(reps, [&](int i) {
                      CHECK(cuStreamWaitValue32(sb, flag_b, 0, CU_STREAM_WAIT_VALUE_GEQ));
                      drain(i);
                    })});
    CHECK(cuCtxSetCurrent(a));
  }
  CHECK(cuStreamSynchronize(sa));
  CHECK(cuCtxSetCurrent(b));
  CHECK(cuStreamSynchronize(sb));
  CHECK(cuCtxSetCurrent(a));
  std::printf("CPU time of one call, median of %d (us):\n", reps);
  for (const Row& r : rows) std::printf("  %-52s %7.2f\n", r.name, r.us);
  if (memops != CUDA_SUCCESS) std::printf("  stream memory operations: not supported here (%d)\n", memops);

  // The chain: N bytes D2H on sa, then H2D of them on sb, in `pieces` equal pieces (each H2D after
  // its own D2H); from the first call to cuStreamSynchronize(sb)'s return.
  unsigned seq = 1;
  auto chain = [&](std::size_t n, int pieces, bool by_memop) {
    const std::size_t each = n / pieces;
    const auto t0 = Clock::now();
    for (int p = 0; p < pieces; ++p) {
      char* slot = static_cast<char*>(pinned) + p * each;
      CHECK(cuCtxSetCurrent(a));
      CHECK(cuMemcpyDtoHAsync(slot, src + p * each, each, sa));
      if (by_memop)
        CHECK(cuStreamWriteValue32(sa, flag_a, seq + p, 0));
      else
        CHECK(cuEventRecord(ea, sa));
      CHECK(cuCtxSetCurrent(b));
      if (by_memop)
        CHECK(cuStreamWaitValue32(sb, flag_b, seq + p, CU_STREAM_WAIT_VALUE_GEQ));
      else
        CHECK(cuStreamWaitEvent(sb, ea, 0));
      CHECK(cuMemcpyHtoDAsync(dst + p * each, slot, each, sb));
    }
    CHECK(cuStreamSynchronize(sb));
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    seq += pieces;
    CHECK(cuCtxSetCurrent(a));
    return us;
  };
  std::printf("two-leg chain, first call to the end, median of 50 (us):\n");
  std::printf("  %8s %7s %12s %12s\n", "size", "pieces", "event", "memop");
  for (std::size_t n : {std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{4} << 20})
    for (int pieces : {1, 2, 4}) {
      std::vector<double> ev, mo;
      for (int i = 0; i < 51; ++i) {
        ev.push_back(chain(n, pieces, false));
        if (memops == CUDA_SUCCESS) mo.push_back(chain(n, pieces, true));
      }
      std::printf("  %8s %7d %12.1f %12.1f\n", cmt::format_byte_size(n).c_str(), pieces,
                  median(ev), mo.empty() ? 0.0 : median(mo));
    }
  // The legs alone: one D2H, synchronized.
  for (std::size_t n : {std::size_t{256} << 10, std::size_t{1} << 20}) {
    const double us = call_us(51, [&](int) {
      CHECK(cuMemcpyDtoHAsync(pinned, src, n, sa));
      CHECK(cuStreamSynchronize(sa));
    });
    std::printf("  one D2H of %s, async + synchronize: %.1f us\n", cmt::format_byte_size(n).c_str(), us);
  }
  // The copier itself, each shape: a synchronous copy, and an asynchronous one on a stream of A
  // followed by cuStreamSynchronize (no start on the default streams).
  CUstream user = nullptr;
  CHECK(cuStreamCreate(&user, CU_STREAM_NON_BLOCKING));
  std::printf("the copier, first call to the end, median of 50 (us):\n");
  std::printf("  %-14s %8s %12s %14s\n", "shape", "size", "synchronous", "async + sync");
  for (std::size_t k = 0; k < copiers.size(); ++k)
    for (std::size_t n : {std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{4} << 20}) {
      double us[2];
      for (int sync = 1; sync >= 0; --sync) {
        const cmt::PeerRequest r = a_to_b(dst, b, src, a, n, sync ? CU_STREAM_LEGACY : user, sync);
        us[sync] = call_us(51, [&](int) {
          if (copiers[k]->copy(r).bytes_done != n) std::exit(1);
          if (!sync) CHECK(cuStreamSynchronize(user));
        });
      }
      std::printf("  %-14s %8s %12.1f %14.1f\n", shape_names[k].c_str(),
                  cmt::format_byte_size(n).c_str(), us[1], us[0]);
    }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes = {1u << 20, 4u << 20, 16u << 20, 64u << 20, 256u << 20, 1u << 30};
  int rounds = 3;
  std::vector<cmt::PeerShape> shapes = {
      {cmt::PeerCopier::kSlots, cmt::PeerCopier::kSlotBytes, cmt::PeerCopier::kFirstPiece}};
  std::vector<std::string> shape_names = {"built-in"};
  bool calls = false;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--calls") {
      calls = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "cmt-lab-peer: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    if (a == "--shapes") {
      for (std::size_t at = 0; at <= v.size();) {
        std::size_t end = v.find(',', at);
        if (end == std::string::npos) end = v.size();
        const std::string item = v.substr(at, end - at);
        const std::size_t x = item.find('x'), slash = item.find('/');
        cmt::PeerShape sh{};
        if (x == std::string::npos || slash == std::string::npos ||
            !cmt::parse_byte_size(item.substr(x + 1, slash - x - 1), &sh.slot_bytes) ||
            !cmt::parse_byte_size(item.substr(slash + 1), &sh.first_piece)) {
          std::fprintf(stderr, "cmt-lab-peer: bad shape '%s' (expected SLOTSxSIZE/FIRST)\n", item.c_str());
          return 2;
        }
        sh.slots = static_cast<unsigned>(std::atoi(item.substr(0, x).c_str()));
        shapes.push_back(sh);
        shape_names.push_back(item);
        at = end + 1;
      }
    } else if (a == "--rounds") {
      rounds = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--sizes") {
      sizes.clear();
      for (std::size_t at = 0; at <= v.size();) {
        std::size_t end = v.find(',', at), n = 0;
        if (end == std::string::npos) end = v.size();
        if (!cmt::parse_byte_size(v.substr(at, end - at), &n) || n == 0) {
          std::fprintf(stderr, "cmt-lab-peer: bad size in --sizes '%s'\n", v.c_str());
          return 2;
        }
        sizes.push_back(n);
        at = end + 1;
      }
    } else {
      std::fprintf(stderr, "usage: cmt-lab-peer [--sizes 1M,16M,1G] [--rounds 3] [--shapes ...] [--calls]\n");
      return 2;
    }
  }
  const std::size_t cap = *std::max_element(sizes.begin(), sizes.end());
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CUcontext a = nullptr, b = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&a, dev));
  CHECK(cuCtxCreate(&b, nullptr, 0, dev));
  CHECK(cuCtxSetCurrent(a));
  CUdeviceptr src, dst;
  void* pinned = nullptr;
  CHECK(cuMemAlloc(&src, cap));
  CHECK(cuMemAllocHost(&pinned, cap));
  std::vector<unsigned char> want(cap), got(cap);
  for (std::size_t k = 0; k < cap; ++k) want[k] = static_cast<unsigned char>(k * 31 + (k >> 9));
  CHECK(cuMemcpyHtoD(src, want.data(), cap));
  CHECK(cuCtxSetCurrent(b));
  CHECK(cuMemAlloc(&dst, cap));
  CHECK(cuCtxSetCurrent(a));

  std::printf("access flags (0 none, 3 read-write): A on B's memory %u, B on A's memory %u\n",
              access_flags(a, dst), access_flags(b, src));

  const cmt::DriverApi* driver = cmt::real_driver();
  if (!driver) {
    std::fprintf(stderr, "cmt-lab-peer: cmt's driver table did not load\n");
    return 1;
  }
  std::vector<std::unique_ptr<cmt::PeerCopier>> copiers;
  for (const cmt::PeerShape& sh : shapes) copiers.push_back(std::make_unique<cmt::PeerCopier>(*driver, sh));
  if (calls) {
    measure_calls(a, b, src, dst, pinned, copiers, shape_names);
    return 0;
  }
  cmt::PeerCopier* copier_now = copiers[0].get();
  auto cmt_copy = [&](std::size_t n) {
    if (copier_now->copy(a_to_b(dst, b, src, a, n, CU_STREAM_LEGACY, true)).bytes_done != n) {
      std::fprintf(stderr, "cmt-lab-peer: the peer copier stopped short\n");
      std::exit(1);
    }
  };
  auto check = [&](std::size_t n) {
    CHECK(cuCtxSetCurrent(b));
    CHECK(cuMemcpyDtoH(got.data(), dst, n));
    CHECK(cuCtxSetCurrent(a));
    return std::memcmp(got.data(), want.data(), n) == 0;
  };
  auto clear = [&](std::size_t n) {
    CHECK(cuCtxSetCurrent(b));
    CHECK(cuMemsetD8(dst, 0, n));
    CHECK(cuCtxSynchronize());
    CHECK(cuCtxSetCurrent(a));
  };
  // GB/s of `reps` calls of `copy(n)`, after one warm call; every context synchronized at the end.
  auto rate = [&](auto&& copy, std::size_t n) {
    const int reps = static_cast<int>(std::max<std::size_t>(3, std::min<std::size_t>(100, (std::size_t{2} << 30) / n)));
    std::vector<double> r;
    for (int round = 0; round < rounds; ++round) {
      copy(n);
      const auto t0 = Clock::now();
      for (int i = 0; i < reps; ++i) copy(n);
      CHECK(cuCtxSetCurrent(b));
      CHECK(cuCtxSynchronize());
      CHECK(cuCtxSetCurrent(a));
      CHECK(cuCtxSynchronize());
      r.push_back(static_cast<double>(n) * reps /
                  std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
    }
    return median(r);
  };
  // Microseconds an asynchronous copy (on a stream of A) spends in the call, median of 20: the
  // CPU's share of a copy, which a short copy's GPU time must cover.
  CUstream user = nullptr;
  CHECK(cuStreamCreate(&user, CU_STREAM_NON_BLOCKING));
  auto enqueue_us = [&](std::size_t n) {
    std::vector<double> us;
    for (int i = 0; i < 21; ++i) {
      const cmt::PeerRequest r = a_to_b(dst, b, src, a, n, user, false);
      const auto t0 = Clock::now();
      if (copier_now->copy(r).bytes_done != n) std::exit(1);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      CHECK(cuStreamSynchronize(user));
    }
    return median(us);
  };
  auto cuda_copy = [&](std::size_t n) { CHECK(cuMemcpyPeer(dst, b, src, a, n)); };
  auto d2h = [&](std::size_t n) { CHECK(cuMemcpyDtoH(pinned, src, n)); };
  auto h2d = [&](std::size_t n) {
    CHECK(cuCtxSetCurrent(b));
    CHECK(cuMemcpyHtoD(dst, pinned, n));
    CHECK(cuCtxSetCurrent(a));
  };

  std::printf("%10s %14s %14s %12s %12s %10s  bytes (GB/s, median of %d rounds)", "size",
              "CUDA (in GPU)", "cmt via host", "pinned D2H", "pinned H2D", "enqueue us", rounds);
  for (std::size_t k = 1; k < shapes.size(); ++k) std::printf("  %s", shape_names[k].c_str());
  std::printf("\n");
  for (std::size_t n : sizes) {
    clear(n);
    cuda_copy(n);
    CHECK(cuCtxSynchronize());
    bool ok = check(n);
    const double cuda_gbps = rate(cuda_copy, n);
    clear(n);
    cmt_copy(n);
    ok = ok && check(n);
    const double cmt_gbps = rate(cmt_copy, n);
    const double d2h_gbps = rate(d2h, n), h2d_gbps = rate(h2d, n);
    std::printf("%10s %14.2f %14.2f %12.2f %12.2f %10.1f  %s", cmt::format_byte_size(n).c_str(),
                cuda_gbps, cmt_gbps, d2h_gbps, h2d_gbps, enqueue_us(n), ok ? "ok" : "WRONG");
    for (std::size_t k = 1; k < copiers.size(); ++k) {
      copier_now = copiers[k].get();
      clear(n);
      cmt_copy(n);
      const bool shape_ok = check(n);
      std::printf("  %.2f%s", rate(cmt_copy, n), shape_ok ? "" : " WRONG");
      copier_now = copiers[0].get();
    }
    std::printf("\n");
  }
  return 0;
}
