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
// usage: cmt-lab-peer --help
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "common/byte_size.h"
#include "cuda/driver_api.h"
#include "engine/peer/peer_copier.h"

namespace {

using Clock = std::chrono::steady_clock;

#define CHECK(call)                                                                      \
  do {                                                                                   \
    CUresult r_ = (call);                                                                \
    if (r_ != CUDA_SUCCESS) {                                                            \
      const char* n_ = nullptr;                                                          \
      cuGetErrorName(r_, &n_);                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, n_ ? n_ : "?"); \
      std::exit(1);                                                                      \
    }                                                                                    \
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

// The stand-in pair: context A (the source GPU, its memory `src`) and context B (the
// destination, `dst`) on the one GPU, pinned staging memory, and the bytes every copy must give.
struct Pair {
  CUcontext a = nullptr, b = nullptr;
  CUdeviceptr src = 0, dst = 0;
  void* pinned = nullptr;
  std::vector<unsigned char> want, got;

  explicit Pair(std::size_t cap) : want(cap), got(cap) {
    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&a, dev));
    CHECK(cuCtxCreate(&b, nullptr, 0, dev));
    CHECK(cuCtxSetCurrent(a));
    CHECK(cuMemAlloc(&src, cap));
    CHECK(cuMemAllocHost(&pinned, cap));
    for (std::size_t k = 0; k < cap; ++k) want[k] = static_cast<unsigned char>(k * 31 + (k >> 9));
    CHECK(cuMemcpyHtoD(src, want.data(), cap));
    in_b([&] { CHECK(cuMemAlloc(&dst, cap)); });
  }
  // Runs `body` with B's context current, then A's again.
  template <class Body>
  void in_b(Body&& body) {
    CHECK(cuCtxSetCurrent(b));
    body();
    CHECK(cuCtxSetCurrent(a));
  }
  bool check(std::size_t n) {
    in_b([&] { CHECK(cuMemcpyDtoH(got.data(), dst, n)); });
    return std::memcmp(got.data(), want.data(), n) == 0;
  }
  void clear(std::size_t n) {
    in_b([&] {
      CHECK(cuMemsetD8(dst, 0, n));
      CHECK(cuCtxSynchronize());
    });
  }
};

// --calls: where a short copy's time goes. Holds a stream and an event in each context and a
// pinned flag word both reach, for the stream memory operations.
struct CallLab {
  Pair& p;
  CUstream sa = nullptr, sb = nullptr;
  CUevent ea = nullptr;
  volatile unsigned* flag = nullptr;
  CUdeviceptr flag_a = 0, flag_b = 0;
  bool memops = false;
  static constexpr int kReps = 400;

  explicit CallLab(Pair& pair) : p(pair) {
    p.in_b([&] { CHECK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING)); });
    CHECK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&ea, CU_EVENT_DISABLE_TIMING));
    void* flag_host = nullptr;
    CHECK(cuMemHostAlloc(&flag_host, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    flag = static_cast<volatile unsigned*>(flag_host);
    *flag = 0;
    CHECK(cuMemHostGetDevicePointer(&flag_a, flag_host, 0));
    p.in_b([&] { CHECK(cuMemHostGetDevicePointer(&flag_b, flag_host, 0)); });
    memops = cuStreamWriteValue32(sa, flag_a, 0, 0) == CUDA_SUCCESS;
  }

  // Drains the queues every 32 calls (untimed), so that no call waits for room. A stream is
  // synchronized from either context, so the current one stays.
  void drain(int i) {
    if (i % 32 != 31) return;
    CHECK(cuStreamSynchronize(sb));
    CHECK(cuStreamSynchronize(sa));
  }

  // The CPU cost of each call a piece makes, median of kReps.
  void call_costs() {
    const std::size_t piece = 256 << 10;
    std::printf("CPU time of one call, median of %d (us):\n", kReps);
    auto row = [](const char* name, double us) { std::printf("  %-52s %7.2f\n", name, us); };
    row("cuCtxGetCurrent", call_us(kReps, [&](int) {
          CUcontext c;
          CHECK(cuCtxGetCurrent(&c));
        }));
    row("cuCtxSetCurrent (to B and back to A, each)", call_us(kReps, [&](int) {
                                                        CHECK(cuCtxSetCurrent(p.b));
                                                        CHECK(cuCtxSetCurrent(p.a));
                                                      }) / 2);
    row("cuMemcpyDtoHAsync 256 KiB into pinned", call_us(kReps, [&](int i) {
          CHECK(cuMemcpyDtoHAsync(p.pinned, p.src, piece, sa));
          drain(i);
        }));
    p.in_b([&] {
      row("cuMemcpyHtoDAsync 256 KiB from pinned (in B)", call_us(kReps, [&](int i) {
            CHECK(cuMemcpyHtoDAsync(p.dst, p.pinned, piece, sb));
            drain(i);
          }));
    });
    row("cuEventRecord", call_us(kReps, [&](int) { CHECK(cuEventRecord(ea, sa)); }));
    row("cuStreamWaitEvent, the event in the same context", call_us(kReps, [&](int i) {
          CHECK(cuStreamWaitEvent(sa, ea, 0));
          drain(i);
        }));
    p.in_b([&] {
      row("cuStreamWaitEvent, the event in the other context", call_us(kReps, [&](int i) {
            CHECK(cuStreamWaitEvent(sb, ea, 0));
            drain(i);
          }));
    });
    row("cuEventCreate + cuEventDestroy", call_us(kReps, [&](int) {
          CUevent e;
          CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
          CHECK(cuEventDestroy(e));
        }));
    memop_costs(row);
    CHECK(cuStreamSynchronize(sa));
    CHECK(cuStreamSynchronize(sb));
  }

  template <class Row>
  void memop_costs(Row&& row) {
    if (!memops) {
      std::printf("  stream memory operations: not supported here\n");
      return;
    }
    row("cuStreamWriteValue32 (pinned flag)", call_us(kReps, [&](int i) {
          CHECK(cuStreamWriteValue32(sa, flag_a, static_cast<unsigned>(i), 0));
          drain(i);
        }));
    CHECK(cuStreamSynchronize(sa));
    *flag = 0;
    p.in_b([&] {
      row("cuStreamWaitValue32 GEQ (already met, in B)", call_us(kReps, [&](int i) {
            CHECK(cuStreamWaitValue32(sb, flag_b, 0, CU_STREAM_WAIT_VALUE_GEQ));
            drain(i);
          }));
    });
  }

  // The chain: n bytes D2H on sa, then H2D of them on sb, in `pieces` equal pieces (each H2D
  // after its own D2H, ordered by an event or a stream memory operation); microseconds from the
  // first call to cuStreamSynchronize(sb)'s return.
  unsigned seq = 1;
  double chain(std::size_t n, int pieces, bool by_memop) {
    const std::size_t each = n / pieces;
    const auto t0 = Clock::now();
    for (int k = 0; k < pieces; ++k) {
      char* slot = static_cast<char*>(p.pinned) + k * each;
      CHECK(cuCtxSetCurrent(p.a));
      CHECK(cuMemcpyDtoHAsync(slot, p.src + k * each, each, sa));
      if (by_memop)
        CHECK(cuStreamWriteValue32(sa, flag_a, seq + k, 0));
      else
        CHECK(cuEventRecord(ea, sa));
      CHECK(cuCtxSetCurrent(p.b));
      if (by_memop)
        CHECK(cuStreamWaitValue32(sb, flag_b, seq + k, CU_STREAM_WAIT_VALUE_GEQ));
      else
        CHECK(cuStreamWaitEvent(sb, ea, 0));
      CHECK(cuMemcpyHtoDAsync(p.dst + k * each, slot, each, sb));
    }
    CHECK(cuStreamSynchronize(sb));
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    seq += pieces;
    CHECK(cuCtxSetCurrent(p.a));
    return us;
  }

  void chains() {
    std::printf("two-leg chain, first call to the end, median of 50 (us):\n");
    std::printf("  %8s %7s %12s %12s\n", "size", "pieces", "event", "memop");
    for (std::size_t n : {std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{4} << 20})
      for (int pieces : {1, 2, 4}) {
        std::vector<double> ev, mo;
        for (int i = 0; i < 51; ++i) {
          ev.push_back(chain(n, pieces, false));
          if (memops) mo.push_back(chain(n, pieces, true));
        }
        std::printf("  %8s %7d %12.1f %12.1f\n", cmt::format_byte_size(n).c_str(), pieces,
                    median(ev), mo.empty() ? 0.0 : median(mo));
      }
    // The legs alone: one D2H, synchronized.
    for (std::size_t n : {std::size_t{256} << 10, std::size_t{1} << 20}) {
      const double us = call_us(51, [&](int) {
        CHECK(cuMemcpyDtoHAsync(p.pinned, p.src, n, sa));
        CHECK(cuStreamSynchronize(sa));
      });
      std::printf("  one D2H of %s, async + synchronize: %.1f us\n",
                  cmt::format_byte_size(n).c_str(), us);
    }
  }

  // The copier itself, each shape: a synchronous copy, and an asynchronous one on a stream of A
  // followed by cuStreamSynchronize (no start on the default streams).
  void copier_times(const std::vector<std::unique_ptr<cmt::PeerCopier>>& copiers,
                    const std::vector<std::string>& shape_names) {
    CUstream user = nullptr;
    CHECK(cuStreamCreate(&user, CU_STREAM_NON_BLOCKING));
    std::printf("the copier, first call to the end, median of 50 (us):\n");
    std::printf("  %-14s %8s %12s %14s\n", "shape", "size", "synchronous", "async + sync");
    for (std::size_t k = 0; k < copiers.size(); ++k)
      for (std::size_t n : {std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{4} << 20}) {
        double us[2];
        for (int sync = 1; sync >= 0; --sync) {
          const cmt::PeerRequest r =
              a_to_b(p.dst, p.b, p.src, p.a, n, sync ? CU_STREAM_LEGACY : user, sync);
          us[sync] = call_us(51, [&](int) {
            if (copiers[k]->copy(r).bytes_done != n) std::exit(1);
            if (!sync) CHECK(cuStreamSynchronize(user));
          });
        }
        std::printf("  %-14s %8s %12.1f %14.1f\n", shape_names[k].c_str(),
                    cmt::format_byte_size(n).c_str(), us[1], us[0]);
      }
  }
};

struct Options {
  std::vector<std::size_t> sizes = {1u << 20, 4u << 20, 16u << 20, 64u << 20, 256u << 20, 1u << 30};
  int rounds = 3;
  std::vector<cmt::PeerShape> shapes = {
      {cmt::PeerCopier::kSlots, cmt::PeerCopier::kSlotBytes, cmt::PeerCopier::kFirstPiece}};
  std::vector<std::string> shape_names = {"built-in"};
  bool calls = false;
};

// "4x16M/256K": slots x slot size / first piece.
cmt::PeerShape parse_shape(const std::string& item) {
  const std::size_t x = item.find('x'), slash = item.find('/');
  cmt::PeerShape sh{};
  if (x == std::string::npos || slash == std::string::npos ||
      !cmt::parse_byte_size(item.substr(x + 1, slash - x - 1), &sh.slot_bytes) ||
      !cmt::parse_byte_size(item.substr(slash + 1), &sh.first_piece))
    throw CLI::ValidationError("--shapes", "bad shape '" + item + "' (expected SLOTSxSIZE/FIRST)");
  sh.slots = static_cast<unsigned>(std::atoi(item.substr(0, x).c_str()));
  return sh;
}

int parse(int argc, char** argv, Options* o) {
  CLI::App app{
      "GPU-to-GPU copies through the host between two contexts of one GPU (a stand-in "
      "for a second GPU): CUDA's cuMemcpyPeer, cmt's peer copier, the two legs alone",
      "cmt-lab-peer"};
  cmt::bench::add_sizes(app, "--sizes", &o->sizes, "Copy sizes");
  app.add_option("--rounds", o->rounds, "Rounds per measurement")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option_function<std::vector<std::string>>(
         "--shapes",
         [o](const std::vector<std::string>& items) {
           for (const std::string& item : items) {
             o->shapes.push_back(parse_shape(item));
             o->shape_names.push_back(item);
           }
         },
         "More lane shapes for cmt's column, SLOTSxSLOT/FIRST (e.g. 4x16M/256K,8x8M/1M)")
      ->delimiter(',');
  app.add_flag("--calls", o->calls,
               "Instead: what each driver call of a piece costs, the two-leg chain, the copier");
  return cmt::bench::parse_command_line(app, argc, argv);
}

// GB/s of `reps` calls of `copy(n)` after one warm call, every context synchronized at the end;
// the median of `rounds`.
template <class Copy>
double rate(Pair& p, int rounds, Copy&& copy, std::size_t n) {
  const int reps = static_cast<int>(
      std::max<std::size_t>(3, std::min<std::size_t>(100, (std::size_t{2} << 30) / n)));
  std::vector<double> r;
  for (int round = 0; round < rounds; ++round) {
    copy(n);
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) copy(n);
    p.in_b([] { CHECK(cuCtxSynchronize()); });
    CHECK(cuCtxSynchronize());
    r.push_back(static_cast<double>(n) * reps /
                std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
  }
  return median(r);
}

// Microseconds an asynchronous copy (on a stream of A) spends in the call, median of 20: the
// CPU's share of a copy, which a short copy's GPU time must cover.
double enqueue_us(Pair& p, cmt::PeerCopier& copier, CUstream user, std::size_t n) {
  std::vector<double> us;
  for (int i = 0; i < 21; ++i) {
    const cmt::PeerRequest r = a_to_b(p.dst, p.b, p.src, p.a, n, user, false);
    const auto t0 = Clock::now();
    if (copier.copy(r).bytes_done != n) std::exit(1);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    CHECK(cuStreamSynchronize(user));
  }
  return median(us);
}

// The table: by size, CUDA's copy within the GPU, cmt's copier through the host (each shape),
// the legs alone and the copier's enqueue time, bytes checked.
void by_size(Pair& p, const Options& o,
             const std::vector<std::unique_ptr<cmt::PeerCopier>>& copiers) {
  cmt::PeerCopier* now = copiers[0].get();
  auto cmt_copy = [&](std::size_t n) {
    if (now->copy(a_to_b(p.dst, p.b, p.src, p.a, n, CU_STREAM_LEGACY, true)).bytes_done != n) {
      std::fprintf(stderr, "cmt-lab-peer: the peer copier stopped short\n");
      std::exit(1);
    }
  };
  auto cuda_copy = [&](std::size_t n) { CHECK(cuMemcpyPeer(p.dst, p.b, p.src, p.a, n)); };
  auto d2h = [&](std::size_t n) { CHECK(cuMemcpyDtoH(p.pinned, p.src, n)); };
  auto h2d = [&](std::size_t n) { p.in_b([&] { CHECK(cuMemcpyHtoD(p.dst, p.pinned, n)); }); };
  CUstream user = nullptr;
  CHECK(cuStreamCreate(&user, CU_STREAM_NON_BLOCKING));
  std::printf("%10s %14s %14s %12s %12s %10s  bytes (GB/s, median of %d rounds)", "size",
              "CUDA (in GPU)", "cmt via host", "pinned D2H", "pinned H2D", "enqueue us", o.rounds);
  for (std::size_t k = 1; k < o.shapes.size(); ++k) std::printf("  %s", o.shape_names[k].c_str());
  std::printf("\n");
  for (std::size_t n : o.sizes) {
    p.clear(n);
    cuda_copy(n);
    CHECK(cuCtxSynchronize());
    bool ok = p.check(n);
    const double cuda_gbps = rate(p, o.rounds, cuda_copy, n);
    p.clear(n);
    cmt_copy(n);
    ok = ok && p.check(n);
    const double cmt_gbps = rate(p, o.rounds, cmt_copy, n);
    const double d2h_gbps = rate(p, o.rounds, d2h, n), h2d_gbps = rate(p, o.rounds, h2d, n);
    std::printf("%10s %14.2f %14.2f %12.2f %12.2f %10.1f  %s", cmt::format_byte_size(n).c_str(),
                cuda_gbps, cmt_gbps, d2h_gbps, h2d_gbps, enqueue_us(p, *now, user, n),
                ok ? "ok" : "WRONG");
    for (std::size_t k = 1; k < copiers.size(); ++k) {
      now = copiers[k].get();
      p.clear(n);
      cmt_copy(n);
      const bool shape_ok = p.check(n);
      std::printf("  %.2f%s", rate(p, o.rounds, cmt_copy, n), shape_ok ? "" : " WRONG");
      now = copiers[0].get();
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int status = parse(argc, argv, &o); status >= 0) return status;
  Pair p(*std::max_element(o.sizes.begin(), o.sizes.end()));
  std::printf("access flags (0 none, 3 read-write): A on B's memory %u, B on A's memory %u\n",
              access_flags(p.a, p.dst), access_flags(p.b, p.src));
  CHECK(cuCtxSetCurrent(p.a));
  const cmt::DriverApi* driver = cmt::real_driver();
  if (!driver) {
    std::fprintf(stderr, "cmt-lab-peer: cmt's driver table did not load\n");
    return 1;
  }
  std::vector<std::unique_ptr<cmt::PeerCopier>> copiers;
  for (const cmt::PeerShape& sh : o.shapes)
    copiers.push_back(std::make_unique<cmt::PeerCopier>(*driver, sh));
  if (o.calls) {
    CallLab lab(p);
    lab.call_costs();
    lab.chains();
    lab.copier_times(copiers, o.shape_names);
    return 0;
  }
  by_size(p, o, copiers);
  return 0;
}
