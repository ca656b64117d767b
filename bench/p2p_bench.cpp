// cmt-bench-p2p: what p2pBandwidthLatencyTest users expect of a multi-GPU host (p2p-bandwidth-
// test.txt in the seeds), run by `cmt bench p2p`:
//   - the peer-access matrix (cudaDeviceCanAccessPeer);
//   - unidirectional bandwidth, GPU i -> GPU j by cudaMemcpyPeerAsync on a stream of i, timed by
//     events, with peer access disabled (CUDA stages through the host) and enabled;
//   - bidirectional bandwidth, i -> j and j -> i at once on a stream of each;
//   - latency: a small cudaMemcpyPeerAsync, GPU-observed (events around many copies) and
//     host-observed (the wall time of a synchronous cudaMemcpyPeer), each access mode.
// The bytes of every pair's copy are checked once per mode. The diagonal is a copy within one
// GPU. The matrices are CUDA's own: the thread opts out of cmt (cmt_forward_this_thread) if
// libcmt.so is loaded.
//   - with --sizes: cudaMemcpyPeer through the host (peer access disabled), GPU i -> j, for each
//     size: CUDA's own path and cmt's (libcmt.so preloaded: `cmt bench p2p` does it) alternating
//     in rounds, median and spread of each, bytes checked in every mode; then, with peer access
//     enabled, the same at the largest size, where cmt must leave the copies to CUDA (exit 1 if
//     cmt's run is under 0.8 of CUDA's).
//
// usage: cmt-bench-p2p --help
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_process.h"
#include "common/output_file.h"
#include "common/byte_size.h"
#include "config/options.h"
#include "cuda_check.h"

namespace {

using Clock = std::chrono::steady_clock;
using Matrix = std::vector<std::vector<double>>;

struct Options {
  std::size_t bytes = 256u << 20;
  int reps = 10;
  std::size_t latency_bytes = 4;
  int latency_reps = 1000;
  // The through-the-host table (none: no table, and libcmt.so need not be loaded).
  std::vector<std::size_t> sizes = {256u << 10, 512u << 10, 1u << 20,   4u << 20,
                                    16u << 20,  64u << 20,  256u << 20, 1u << 30};
  int rounds = 5;
  std::string json;
};

// A failure after the command line was read: says why and ends the program.
[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "cmt-bench-p2p: %s\n", why.c_str());
  std::exit(1);
}

// The command line (cmt bench p2p passes its arguments here untouched). Returns -1 to go on,
// else the status to exit with.
int parse(int argc, char** argv, Options* o) {
  CLI::App app{
      "GPU <-> GPU: the peer-access matrix, one-way and both-ways bandwidth and latency "
      "matrices with peer access disabled and enabled (CUDA's own), then cudaMemcpyPeer "
      "through the host, CUDA's path against cmt's, by size; bytes checked",
      "cmt-bench-p2p"};
  cmt::bench::add_size(app, "--bytes", &o->bytes, "Bytes per bandwidth copy");
  app.add_option("--reps", o->reps, "Copies per measurement")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmt::bench::add_size(app, "--latency-bytes", &o->latency_bytes, "Bytes per latency copy");
  std::string shown;
  for (std::size_t s : o->sizes) shown += (shown.empty() ? "" : ",") + cmt::format_byte_size(s);
  app.add_option_function<std::string>(
         "--sizes",
         [o](const std::string& v) {
           o->sizes =
               v == "none" ? std::vector<std::size_t>{} : cmt::bench::parse_sizes(v, "--sizes");
         },
         "Sizes of the through-the-host comparison, or none (" +
             cmt::format_byte_size(cmt::Config{}.peer_threshold) +
             " is the smallest cmt takes: peer_threshold)")
      ->type_name("SIZES")
      ->default_str(shown);
  app.add_option("--rounds", o->rounds, "Rounds of that comparison, CUDA and cmt alternating")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--json", o->json, "Write the matrices and the comparison as JSON");
  return cmt::bench::parse_command_line(app, argc, argv);
}

// Enables (or disables) peer access between every pair that can have it, both ways.
void set_peer_access(int n, const std::vector<std::vector<int>>& can, bool on) {
  for (int i = 0; i < n; ++i) {
    CMT_CHECK_CUDA(cudaSetDevice(i));
    for (int j = 0; j < n; ++j) {
      if (i == j || !can[i][j]) continue;
      const cudaError_t e = on ? cudaDeviceEnablePeerAccess(j, 0) : cudaDeviceDisablePeerAccess(j);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled &&
          e != cudaErrorPeerAccessNotEnabled)
        CMT_CHECK_CUDA(e);
      (void)cudaGetLastError();  // the two expected ones stay sticky otherwise
    }
  }
}

struct Gpu {
  void* a = nullptr;  // source
  void* b = nullptr;  // destination
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

class P2p {
 public:
  P2p(int n, const Options& o) : n_(n), o_(o), gpus_(n) {
    std::vector<unsigned char> pattern(o.bytes);
    for (int i = 0; i < n; ++i) {
      CMT_CHECK_CUDA(cudaSetDevice(i));
      Gpu& g = gpus_[i];
      CMT_CHECK_CUDA(cudaMalloc(&g.a, o.bytes));
      CMT_CHECK_CUDA(cudaMalloc(&g.b, o.bytes));
      CMT_CHECK_CUDA(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
      CMT_CHECK_CUDA(cudaEventCreate(&g.start));
      CMT_CHECK_CUDA(cudaEventCreate(&g.stop));
      for (std::size_t k = 0; k < o.bytes; ++k) pattern[k] = static_cast<unsigned char>(k * 7 + i);
      CMT_CHECK_CUDA(cudaMemcpy(g.a, pattern.data(), o.bytes, cudaMemcpyHostToDevice));
    }
  }

  ~P2p() {
    for (int i = 0; i < n_; ++i) {
      cudaSetDevice(i);
      cudaFree(gpus_[i].a);
      cudaFree(gpus_[i].b);
      cudaStreamDestroy(gpus_[i].stream);
      cudaEventDestroy(gpus_[i].start);
      cudaEventDestroy(gpus_[i].stop);
    }
  }

  // GB/s of `reps` copies i -> j of `bytes`, timed by events on i's stream.
  double one_way(int i, int j, std::size_t bytes, int reps) {
    Gpu& g = gpus_[i];
    CMT_CHECK_CUDA(cudaSetDevice(i));
    CMT_CHECK_CUDA(cudaMemcpyPeerAsync(gpus_[j].b, j, g.a, i, bytes, g.stream));  // warm
    CMT_CHECK_CUDA(cudaEventRecord(g.start, g.stream));
    for (int r = 0; r < reps; ++r)
      CMT_CHECK_CUDA(cudaMemcpyPeerAsync(gpus_[j].b, j, g.a, i, bytes, g.stream));
    CMT_CHECK_CUDA(cudaEventRecord(g.stop, g.stream));
    CMT_CHECK_CUDA(cudaEventSynchronize(g.stop));
    float ms = 0;
    CMT_CHECK_CUDA(cudaEventElapsedTime(&ms, g.start, g.stop));
    return static_cast<double>(bytes) * reps / (ms / 1e3) / 1e9;
  }

  // GB/s of i -> j and j -> i at once (both directions' bytes over the wall time).
  double both_ways(int i, int j, int reps) {
    if (i == j) return one_way(i, j, o_.bytes, reps);
    CMT_CHECK_CUDA(cudaSetDevice(i));
    CMT_CHECK_CUDA(cudaDeviceSynchronize());
    CMT_CHECK_CUDA(cudaSetDevice(j));
    CMT_CHECK_CUDA(cudaDeviceSynchronize());
    const auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) {
      CMT_CHECK_CUDA(cudaMemcpyPeerAsync(gpus_[j].b, j, gpus_[i].a, i, o_.bytes, gpus_[i].stream));
      CMT_CHECK_CUDA(cudaMemcpyPeerAsync(gpus_[i].b, i, gpus_[j].a, j, o_.bytes, gpus_[j].stream));
    }
    CMT_CHECK_CUDA(cudaStreamSynchronize(gpus_[i].stream));
    CMT_CHECK_CUDA(cudaStreamSynchronize(gpus_[j].stream));
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return 2.0 * static_cast<double>(o_.bytes) * reps / s / 1e9;
  }

  // Microseconds per small copy i -> j: GPU-observed (events around many) and host-observed (a
  // synchronous cudaMemcpyPeer each, wall time).
  std::pair<double, double> latency(int i, int j) {
    const double gbps = one_way(i, j, o_.latency_bytes, o_.latency_reps);
    const double gpu_us = static_cast<double>(o_.latency_bytes) / (gbps * 1e9) * 1e6;
    CMT_CHECK_CUDA(cudaSetDevice(i));
    const int reps = o_.latency_reps / 10;
    const auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r)
      CMT_CHECK_CUDA(cudaMemcpyPeer(gpus_[j].b, j, gpus_[i].a, i, o_.latency_bytes));
    const double host_us = std::chrono::duration<double>(Clock::now() - t0).count() * 1e6 / reps;
    return {gpu_us, host_us};
  }

  // Whether j's destination holds i's source after a copy i -> j.
  bool check(int i, int j) {
    CMT_CHECK_CUDA(cudaSetDevice(j));
    CMT_CHECK_CUDA(cudaMemset(gpus_[j].b, 0, o_.bytes));
    CMT_CHECK_CUDA(cudaDeviceSynchronize());
    CMT_CHECK_CUDA(cudaMemcpyPeer(gpus_[j].b, j, gpus_[i].a, i, o_.bytes));
    std::vector<unsigned char> got(o_.bytes);
    CMT_CHECK_CUDA(cudaMemcpy(got.data(), gpus_[j].b, o_.bytes, cudaMemcpyDeviceToHost));
    for (std::size_t k = 0; k < o_.bytes; ++k)
      if (got[k] != static_cast<unsigned char>(k * 7 + i)) return false;
    return true;
  }

 private:
  int n_;
  const Options& o_;
  std::vector<Gpu> gpus_;
};

// cmt's per-thread switch, if libcmt.so is loaded: nonzero sends this thread's copies to CUDA.
using ForwardFn = int (*)(int);
ForwardFn cmt_switch() {
  static ForwardFn fn = reinterpret_cast<ForwardFn>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread"));
  return fn;
}
void use_cuda_only(bool on) {
  if (cmt_switch()) cmt_switch()(on ? 1 : 0);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct HostPathRow {
  int from, to;
  std::size_t bytes;
  int reps;
  std::vector<double> cuda, cmt;  // GB/s per round
  bool cuda_ok = true, cmt_ok = true;
};

// Synchronous cudaMemcpyPeer from GPU `from` to GPU `to`, peer access disabled: `reps` copies per
// round, CUDA's path and cmt's alternating (which goes first alternates too), bytes checked after
// each mode's first round.
HostPathRow through_host(int from, int to, std::size_t bytes, int rounds) {
  HostPathRow row{from, to, bytes, 0, {}, {}};
  row.reps = static_cast<int>(
      std::max<std::size_t>(3, std::min<std::size_t>(200, (std::size_t{2} << 30) / bytes)));
  void *src = nullptr, *dst = nullptr;
  CMT_CHECK_CUDA(cudaSetDevice(from));
  CMT_CHECK_CUDA(cudaMalloc(&src, bytes));
  std::vector<unsigned char> want(bytes), got(bytes);
  for (std::size_t k = 0; k < bytes; ++k)
    want[k] = static_cast<unsigned char>((k * 13) ^ (k >> 11));
  CMT_CHECK_CUDA(cudaMemcpy(src, want.data(), bytes, cudaMemcpyHostToDevice));
  CMT_CHECK_CUDA(cudaSetDevice(to));
  CMT_CHECK_CUDA(cudaMalloc(&dst, bytes));
  CMT_CHECK_CUDA(cudaSetDevice(from));
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      const bool cuda_path = (k == 0) == (round % 2 == 0);
      use_cuda_only(cuda_path);
      if (round < 2) {  // each mode's first round: the bytes, from a cleared destination
        CMT_CHECK_CUDA(cudaSetDevice(to));
        CMT_CHECK_CUDA(cudaMemset(dst, 0, bytes));
        CMT_CHECK_CUDA(cudaDeviceSynchronize());
        CMT_CHECK_CUDA(cudaSetDevice(from));
        CMT_CHECK_CUDA(cudaMemcpyPeer(dst, to, src, from, bytes));
        use_cuda_only(true);
        CMT_CHECK_CUDA(cudaSetDevice(to));
        CMT_CHECK_CUDA(cudaMemcpy(got.data(), dst, bytes, cudaMemcpyDeviceToHost));
        CMT_CHECK_CUDA(cudaSetDevice(from));
        if (std::memcmp(got.data(), want.data(), bytes) != 0)
          (cuda_path ? row.cuda_ok : row.cmt_ok) = false;
        use_cuda_only(cuda_path);
      }
      CMT_CHECK_CUDA(cudaMemcpyPeer(dst, to, src, from, bytes));  // warm
      const auto t0 = Clock::now();
      for (int r = 0; r < row.reps; ++r) CMT_CHECK_CUDA(cudaMemcpyPeer(dst, to, src, from, bytes));
      CMT_CHECK_CUDA(cudaSetDevice(to));
      CMT_CHECK_CUDA(cudaDeviceSynchronize());
      CMT_CHECK_CUDA(cudaSetDevice(from));
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      (cuda_path ? row.cuda : row.cmt).push_back(static_cast<double>(bytes) * row.reps / s / 1e9);
    }
  }
  use_cuda_only(true);
  cudaFree(src);
  CMT_CHECK_CUDA(cudaSetDevice(to));
  cudaFree(dst);
  return row;
}

void print(const char* title, const Matrix& m, const char* unit) {
  std::printf("%s (%s)\n   D\\D", title, unit);
  for (std::size_t j = 0; j < m.size(); ++j) std::printf(" %8zu", j);
  std::printf("\n");
  for (std::size_t i = 0; i < m.size(); ++i) {
    std::printf("%7zu", i);
    for (double v : m[i]) std::printf(" %8.2f", v);
    std::printf("\n");
  }
}

std::string json_matrix(const Matrix& m) {
  std::string out = "[";
  for (std::size_t i = 0; i < m.size(); ++i) {
    out += i ? ", [" : "[";
    for (std::size_t j = 0; j < m[i].size(); ++j) {
      char v[32];
      std::snprintf(v, sizeof(v), "%s%.3f", j ? ", " : "", m[i][j]);
      out += v;
    }
    out += "]";
  }
  return out + "]";
}

using Access = std::vector<std::vector<int>>;  // can[i][j]: GPU i can reach GPU j's memory

// The peer-access matrix, printed.
Access peer_access(int n) {
  Access can(n, std::vector<int>(n, 0));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j) CMT_CHECK_CUDA(cudaDeviceCanAccessPeer(&can[i][j], i, j));
  std::printf("peer access (1: GPU row can access GPU column)\n   D\\D");
  for (int j = 0; j < n; ++j) std::printf(" %3d", j);
  std::printf("\n");
  for (int i = 0; i < n; ++i) {
    std::printf("%7d", i);
    for (int j = 0; j < n; ++j) std::printf(" %3d", i == j ? 1 : can[i][j]);
    std::printf("\n");
  }
  return can;
}

// CUDA's own matrices, [0] with peer access disabled and [1] enabled.
struct Matrices {
  Matrix uni[2], bi[2], lat_gpu[2], lat_host[2];
};

Matrices measure_matrices(P2p& p2p, int n, const Access& can, const Options& o, long* wrong) {
  const Matrix zero(n, std::vector<double>(n, 0));
  Matrices m{{zero, zero}, {zero, zero}, {zero, zero}, {zero, zero}};
  for (int peer = 0; peer < 2; ++peer) {
    set_peer_access(n, can, peer == 1);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        if (!p2p.check(i, j)) ++*wrong;
        m.uni[peer][i][j] = p2p.one_way(i, j, o.bytes, o.reps);
        m.bi[peer][i][j] = p2p.both_ways(i, j, o.reps);
        const auto l = p2p.latency(i, j);
        m.lat_gpu[peer][i][j] = l.first;
        m.lat_host[peer][i][j] = l.second;
      }
    const std::string mode = peer ? "peer access enabled" : "peer access disabled";
    print(("unidirectional bandwidth, " + mode).c_str(), m.uni[peer], "GB/s");
    print(("bidirectional bandwidth, " + mode).c_str(), m.bi[peer], "GB/s");
    print(("latency, GPU-observed, " + mode).c_str(), m.lat_gpu[peer], "us");
    print(("latency, host-observed, " + mode).c_str(), m.lat_host[peer], "us");
  }
  set_peer_access(n, can, false);
  return m;
}

// cudaMemcpyPeer through the host: CUDA's path and cmt's, peer access disabled, every ordered
// pair at every size.
std::vector<HostPathRow> through_host_table(int n, const Options& o, long* wrong) {
  std::vector<HostPathRow> rows;
  std::printf("cudaMemcpyPeer with peer access disabled, %d rounds (GB/s, median [min-max]%s)\n",
              o.rounds, cmt_switch() ? "" : "; libcmt.so not loaded: cmt column is CUDA again");
  std::printf(
      "  from->to      size   reps        CUDA                  cmt              cmt/CUDA  "
      "bytes\n");
  const auto lo = [](const std::vector<double>& v) {
    return *std::min_element(v.begin(), v.end());
  };
  const auto hi = [](const std::vector<double>& v) {
    return *std::max_element(v.begin(), v.end());
  };
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      for (std::size_t bytes : o.sizes) {
        HostPathRow r = through_host(i, j, bytes, o.rounds);
        std::printf("  %4d->%-4d %8s %6d %7.2f [%.2f-%.2f] %7.2f [%.2f-%.2f] %8.2fx  %s\n", i, j,
                    cmt::format_byte_size(bytes).c_str(), r.reps, median(r.cuda), lo(r.cuda),
                    hi(r.cuda), median(r.cmt), lo(r.cmt), hi(r.cmt), median(r.cmt) / median(r.cuda),
                    r.cuda_ok && r.cmt_ok ? "ok" : "WRONG");
        if (!r.cuda_ok || !r.cmt_ok) ++*wrong;
        rows.push_back(std::move(r));
      }
    }
  return rows;
}

// With peer access enabled cmt must leave every copy to CUDA's direct path: the same comparison
// at the largest size, where a copy taken through the host would run several times slower. A
// ratio under 0.8 counts in `*taken`.
std::vector<HostPathRow> peer_enabled_table(int n, const Access& can, const Options& o, long* wrong,
                                            long* taken) {
  std::vector<HostPathRow> rows;
  set_peer_access(n, can, true);
  const std::size_t bytes = *std::max_element(o.sizes.begin(), o.sizes.end());
  std::printf("cudaMemcpyPeer with peer access enabled, %s: cmt must leave it to CUDA\n",
              cmt::format_byte_size(bytes).c_str());
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i == j || !can[i][j]) continue;
      HostPathRow r = through_host(i, j, bytes, o.rounds);
      const double ratio = median(r.cmt) / median(r.cuda);
      const bool left_alone = ratio >= 0.8;
      if (!left_alone) ++*taken;
      if (!r.cuda_ok || !r.cmt_ok) ++*wrong;
      std::printf("  %4d->%-4d CUDA %.2f, with cmt loaded %.2f GB/s (%.2fx): %s\n", i, j,
                  median(r.cuda), median(r.cmt), ratio,
                  left_alone ? "left to CUDA" : "TAKEN THOUGH PEER ACCESS IS ON");
      rows.push_back(std::move(r));
    }
  set_peer_access(n, can, false);
  return rows;
}

std::string json_list(const std::vector<double>& v) {
  std::string out = "[";
  for (std::size_t q = 0; q < v.size(); ++q) {
    char b[32];
    std::snprintf(b, sizeof(b), "%s%.3f", q ? ", " : "", v[q]);
    out += b;
  }
  return out + "]";
}

struct Report {
  std::string date, gpu;
  int n = 0;
  Access can;
  Matrices m;
  std::vector<HostPathRow> rows, enabled_rows;
  long wrong = 0, taken_with_access = 0;
};

void write_json(const Options& o, const Report& r) {
  cmt::OutputFile out(o.json);
  std::FILE* f = out.stream();
  if (!f) fail("cannot write " + o.json + ": " + out.why());
  Matrix access(r.n, std::vector<double>(r.n, 1));
  for (int i = 0; i < r.n; ++i)
    for (int j = 0; j < r.n; ++j)
      if (i != j) access[i][j] = r.can[i][j];
  std::fprintf(
      f,
      "{\n  \"benchmark\": \"cmt-bench-p2p\",\n  \"cmt_version\": \"%s\",\n  \"date\": "
      "\"%s\",\n  \"gpus\": %d,\n  \"gpu\": \"%s\",\n  \"bytes\": %zu,\n  \"reps\": %d,\n  "
      "\"latency_bytes\": %zu,\n  \"wrong_copies\": %ld,\n  \"peer_access\": %s",
      CMT_VERSION, r.date.c_str(), r.n, r.gpu.c_str(), o.bytes, o.reps, o.latency_bytes, r.wrong,
      json_matrix(access).c_str());
  for (int peer = 0; peer < 2; ++peer)
    std::fprintf(f,
                 ",\n  \"%s\": {\"unidirectional_gbps\": %s, \"bidirectional_gbps\": %s, "
                 "\"latency_gpu_us\": %s, \"latency_host_us\": %s}",
                 peer ? "enabled" : "disabled", json_matrix(r.m.uni[peer]).c_str(),
                 json_matrix(r.m.bi[peer]).c_str(), json_matrix(r.m.lat_gpu[peer]).c_str(),
                 json_matrix(r.m.lat_host[peer]).c_str());
  std::fprintf(f, ",\n  \"cmt_loaded\": %s,\n  \"through_host\": [",
               cmt_switch() ? "true" : "false");
  for (std::size_t k = 0; k < r.rows.size(); ++k) {
    const HostPathRow& h = r.rows[k];
    std::fprintf(f,
                 "%s\n    {\"from\": %d, \"to\": %d, \"bytes\": %zu, \"reps\": %d, "
                 "\"cuda_gbps\": %s, \"cmt_gbps\": %s, \"cuda_median\": %.3f, "
                 "\"cmt_median\": %.3f, \"ratio\": %.3f, \"bytes_ok\": %s}",
                 k ? "," : "", h.from, h.to, h.bytes, h.reps, json_list(h.cuda).c_str(),
                 json_list(h.cmt).c_str(), median(h.cuda), median(h.cmt),
                 median(h.cmt) / median(h.cuda), h.cuda_ok && h.cmt_ok ? "true" : "false");
  }
  std::fprintf(f, "\n  ],\n  \"peer_enabled\": [");
  for (std::size_t k = 0; k < r.enabled_rows.size(); ++k) {
    const HostPathRow& h = r.enabled_rows[k];
    std::fprintf(f,
                 "%s\n    {\"from\": %d, \"to\": %d, \"bytes\": %zu, \"cuda_median\": %.3f, "
                 "\"cmt_median\": %.3f, \"ratio\": %.3f}",
                 k ? "," : "", h.from, h.to, h.bytes, median(h.cuda), median(h.cmt),
                 median(h.cmt) / median(h.cuda));
  }
  std::fprintf(f, "\n  ],\n  \"taken_with_peer_access\": %ld\n}\n", r.taken_with_access);
  if (!out.commit()) fail("cannot write " + o.json + ": " + out.why());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int status = parse(argc, argv, &o); status >= 0) return status;
  if (!o.sizes.empty()) cmt::bench::ensure_preloaded(argv);  // cmt's column needs libcmt.so
  Report r;
  if (cudaGetDeviceCount(&r.n) != cudaSuccess || r.n == 0) fail("no CUDA GPU found");
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  r.date = date;
  cudaDeviceProp prop{};
  CMT_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  r.gpu = prop.name;
  std::printf("cmt-bench-p2p  %s  %d x %s  %s per copy, %d copies; latency %s x %d\n", date, r.n,
              prop.name, cmt::format_byte_size(o.bytes).c_str(), o.reps,
              cmt::format_byte_size(o.latency_bytes).c_str(), o.latency_reps);
  r.can = peer_access(r.n);
  use_cuda_only(true);  // the matrices are CUDA's own
  P2p p2p(r.n, o);
  r.m = measure_matrices(p2p, r.n, r.can, o, &r.wrong);
  if (r.wrong) std::printf("WRONG BYTES in %ld pair copies\n", r.wrong);
  if (!o.sizes.empty()) r.rows = through_host_table(r.n, o, &r.wrong);
  if (!o.sizes.empty() && cmt_switch())
    r.enabled_rows = peer_enabled_table(r.n, r.can, o, &r.wrong, &r.taken_with_access);
  if (!o.json.empty()) write_json(o, r);
  return r.wrong || r.taken_with_access ? 1 : 0;
}
