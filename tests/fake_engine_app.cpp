// Random round trips through the driver API, for fake_engine.sh: each thread copies pageable (and
// now and then pinned) host memory to a device buffer and back, synchronously or on its own stream,
// at sizes from 1 B to 24 MiB and odd offsets, and checks every byte. Linked against the fake
// libcuda (fake_libcuda_engine.cpp), so with libcmt.so preloaded the copies run through cmt's
// hooks and engine on a CPU machine.
//
// With a fourth argument, "peer" (and CMT_FAKE_CUDA devices=2), each round trip goes host -> GPU 0
// -> GPU 1 -> host instead, the middle leg by cuMemcpyPeer, cuMemcpyPeerAsync, cuMemcpyDtoD,
// cuMemcpyDtoDAsync or cuMemcpyAsync in turn: the GPU-to-GPU hooks and the path through the host.
//
// Before the round trips, one batch with a failing copy: failIdx must name it in the program's
// batch, also where cmt took the copies before it.
//
// With "fork" instead, the threads' round trips run, then the process forks: the child (which
// cannot use CUDA, as a child of a process that did cannot) copies host memory and ends with
// exit(0), so its atexit handlers run (cmt's statistics and trace included); the parent waits for
// it, then makes ROUNDS more round trips. For record_trace.sh's check that each process writes
// only what it did itself.
//
// With "reset", after the threads' round trips the primary context is reset four times
// (cudaDeviceReset's driver call), each followed by ROUNDS more round trips on one thread: cmt
// lets go of the lanes it had in the context, and builds them anew. With "peer-reset", the same
// after peer rounds, GPU 0's and GPU 1's contexts in turn, each followed by peer rounds: the
// GPU-to-GPU lane that names the context goes with it. With "green", four green contexts one
// after another, each made current for ROUNDS round trips and then destroyed. With "unseen", as
// "reset" but each end made where no hook of cmt's sees it (fake_cuda_end_context_unseen): cmt
// must find it at its next copy, and no handle of the ended context may reach the driver.
//
// With "cancel", before anything else reaches cmt, threads with a cancellation pending (deferred)
// make copies to and from the device: the first of them builds cmt's state (reading files, a
// cancellation point inside cmt's noexcept frames, which ended the process). Each must return
// whole and be cancelled at the thread's next cancellation point; then the round trips run.
//
// usage: fake_engine_app THREADS ROUNDS SEED [peer|fork|reset|peer-reset|green|unseen|cancel]
// Prints "trips N ok N failed N wrong N max_rss_mb N dmas N ..." (the fake's counters); exits 1 if
// any copy that reported success left a wrong byte.
#include <cuda.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

// CUDA 12.8's batch entry (cuda.h names CUDA 13's _v2 form cuMemcpyBatchAsync).
extern "C" CUresult batch_v1(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*,
                             size_t*, size_t, size_t*, CUstream) __asm__("cuMemcpyBatchAsync");

extern "C" long fake_cuda_dead_handle_calls();
extern "C" void fake_cuda_end_context_unseen(CUdevice d);
extern "C" void fake_cuda_counts(long* dmas, long* enqueues, long* queries, long* records,
                                 long* registers);

namespace {

constexpr std::size_t kMaxBytes = 24u << 20;
constexpr std::size_t kSlack = 4096;

std::atomic<long> g_ok{0}, g_failed{0}, g_wrong{0};

// The copy [dst, dst + n) <- [src, src + n) as one batch of `parts` pieces on `stream`: the first
// piece's source read in stream order, the others' by `rest` (any time only where no work on the
// stream touches the source); by CUDA 12.8's entry if `v1`. In order, cmt takes the pieces as one
// copy; `reversed`, one by one.
CUresult batch_copy(CUdeviceptr dst, CUdeviceptr src, std::size_t n, unsigned parts, bool v1,
                    CUmemcpySrcAccessOrder rest, bool reversed, CUstream stream) {
  parts = static_cast<unsigned>(std::min<std::size_t>(parts, n));
  std::vector<CUdeviceptr> dsts, srcs;
  std::vector<size_t> sizes;
  for (unsigned p = 0, at = 0; p < parts; ++p) {
    const std::size_t piece = p + 1 < parts ? n / parts : n - at;
    dsts.push_back(dst + at);
    srcs.push_back(src + at);
    sizes.push_back(piece);
    at += static_cast<unsigned>(piece);
  }
  if (reversed) {
    std::reverse(dsts.begin(), dsts.end());
    std::reverse(srcs.begin(), srcs.end());
    std::reverse(sizes.begin(), sizes.end());
  }
  CUmemcpyAttributes attrs[2] = {};
  attrs[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  attrs[1].srcAccessOrder = rest;
  size_t idxs[2] = {0, 1};
  const size_t num_attrs = parts > 1 ? 2 : 1;
  size_t failed_at = 0;
  return v1 ? batch_v1(dsts.data(), srcs.data(), sizes.data(), parts, attrs, idxs, num_attrs,
                       &failed_at, stream)
            : cuMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), parts, attrs, idxs,
                                 num_attrs, stream);
}

CUdeviceptr addr(const void* p) {
  return reinterpret_cast<CUdeviceptr>(p);
}

std::size_t random_size(std::mt19937_64& rng) {
  // Half below cmt's default threshold, half above it, where the engine takes them.
  if (rng() % 2) return 1 + rng() % (2u << 20);
  return (2u << 20) + rng() % (kMaxBytes - (2u << 20) + 1);
}

void worker(int id, int rounds, unsigned seed) {
  std::mt19937_64 rng(seed * 7919u + static_cast<unsigned>(id));
  CUdeviceptr dev = 0;
  CUstream stream = nullptr;
  void* pinned = nullptr;
  if (cuMemAlloc(&dev, kMaxBytes + kSlack) != CUDA_SUCCESS ||
      cuStreamCreate(&stream, 0) != CUDA_SUCCESS ||
      cuMemAllocHost(&pinned, kMaxBytes + kSlack) != CUDA_SUCCESS) {
    std::fprintf(stderr, "thread %d: setup failed\n", id);
    std::exit(2);
  }
  std::vector<unsigned char> src(kMaxBytes + kSlack), back(kMaxBytes + kSlack);
  for (int r = 0; r < rounds; ++r) {
    std::size_t n = random_size(rng);
    std::size_t so = rng() % 64, bo = rng() % 64, d_off = rng() % 64;
    bool use_pinned = rng() % 8 == 0;
    const int way = static_cast<int>(rng() % 3);  // 0 synchronous, 1 asynchronous, 2 batches
    const bool async = way != 0;
    unsigned char* s = use_pinned ? static_cast<unsigned char*>(pinned) + so : src.data() + so;
    unsigned char fill = static_cast<unsigned char>(rng());
    for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<unsigned char>(fill + i * 131 + (i >> 12));
    std::memset(back.data() + bo, 0xEE, n);
    CUresult a, b;
    if (way == 2) {
      const unsigned parts = 1 + static_cast<unsigned>(rng() % 3);
      const bool reversed = rng() % 2;
      a = batch_copy(dev + d_off, addr(s), n, parts, false, CU_MEMCPY_SRC_ACCESS_ORDER_ANY,
                     reversed, stream);
      b = batch_copy(addr(back.data() + bo), dev + d_off, n, parts, true,
                     CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, reversed, stream);
      CUresult c = cuStreamSynchronize(stream);
      if (b == CUDA_SUCCESS) b = c;
    } else if (async) {
      a = cuMemcpyHtoDAsync(dev + d_off, s, n, stream);
      b = cuMemcpyDtoHAsync(back.data() + bo, dev + d_off, n, stream);
      CUresult c = cuStreamSynchronize(stream);
      if (b == CUDA_SUCCESS) b = c;
    } else {
      a = cuMemcpyHtoD(dev + d_off, s, n);
      b = cuMemcpyDtoH(back.data() + bo, dev + d_off, n);
    }
    if (a != CUDA_SUCCESS || b != CUDA_SUCCESS) {
      g_failed.fetch_add(1);
      continue;
    }
    if (std::memcmp(back.data() + bo, s, n) != 0) {
      g_wrong.fetch_add(1);
      std::fprintf(stderr, "thread %d round %d: %zu bytes (%s, %s) came back wrong\n", id, r, n,
                   way == 2 ? "batch"
                   : async  ? "async"
                            : "sync",
                   use_pinned ? "pinned" : "pageable");
    } else {
      g_ok.fetch_add(1);
    }
  }
}

// Host -> GPU 0 -> GPU 1 -> host, the GPU-to-GPU leg by each driver entry point in turn.
void peer_worker(int id, int rounds, unsigned seed) {
  std::mt19937_64 rng(seed * 104729u + static_cast<unsigned>(id));
  CUcontext c0 = nullptr, c1 = nullptr;
  CUdeviceptr d0 = 0, d1 = 0;
  CUstream stream = nullptr;
  if (cuDevicePrimaryCtxRetain(&c0, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&c1, 1) != CUDA_SUCCESS || cuCtxSetCurrent(c1) != CUDA_SUCCESS ||
      cuMemAlloc(&d1, kMaxBytes + kSlack) != CUDA_SUCCESS || cuCtxSetCurrent(c0) != CUDA_SUCCESS ||
      cuMemAlloc(&d0, kMaxBytes + kSlack) != CUDA_SUCCESS ||
      cuStreamCreate(&stream, 0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "thread %d: peer setup failed\n", id);
    std::exit(2);
  }
  std::vector<unsigned char> src(kMaxBytes + kSlack), back(kMaxBytes + kSlack);
  for (int r = 0; r < rounds; ++r) {
    const std::size_t n = random_size(rng);
    const std::size_t so = rng() % 64, o0 = rng() % 64, o1 = rng() % 64;
    const unsigned char fill = static_cast<unsigned char>(rng());
    for (std::size_t i = 0; i < n; ++i) src[so + i] = static_cast<unsigned char>(fill + i * 29 + (i >> 10));
    std::memset(back.data(), 0xEE, n);
    const int how = r % 5;
    // The asynchronous ways are ordered after the upload by their stream (the fake does not make
    // the legacy stream wait for other streams, or them for it, as CUDA's blocking streams do).
    const bool async = how == 1 || how == 3 || how == 4;
    CUresult a = async ? cuMemcpyHtoDAsync(d0 + o0, src.data() + so, n, stream)
                       : cuMemcpyHtoD(d0 + o0, src.data() + so, n);
    CUresult b = CUDA_SUCCESS, c = CUDA_SUCCESS;
    if (a == CUDA_SUCCESS) {
      switch (how) {
        case 0: b = cuMemcpyPeer(d1 + o1, c1, d0 + o0, c0, n); break;
        case 1: b = cuMemcpyPeerAsync(d1 + o1, c1, d0 + o0, c0, n, stream); break;
        case 2: b = cuMemcpyDtoD(d1 + o1, d0 + o0, n); break;
        case 3: b = cuMemcpyDtoDAsync(d1 + o1, d0 + o0, n, stream); break;
        default: b = cuMemcpyAsync(d1 + o1, d0 + o0, n, stream); break;
      }
    }
    if (a == CUDA_SUCCESS && b == CUDA_SUCCESS) {
      c = cuMemcpyDtoHAsync(back.data(), d1 + o1, n, stream);
      const CUresult sync = cuStreamSynchronize(stream);
      if (c == CUDA_SUCCESS) c = sync;
    }
    if (a != CUDA_SUCCESS || b != CUDA_SUCCESS || c != CUDA_SUCCESS) {
      g_failed.fetch_add(1);
    } else if (std::memcmp(back.data(), src.data() + so, n) != 0) {
      g_wrong.fetch_add(1);
      std::fprintf(stderr, "thread %d round %d: %zu bytes GPU 0 -> GPU 1 (way %d) came back wrong\n",
                   id, r, n, how);
    } else {
      g_ok.fetch_add(1);
    }
  }
}

// A batch by CUDA 12.8's entry whose third copy fails (the fake fails a copy of no bytes): the
// call fails and failIdx names that copy in the program's batch, 2, whether cmt took the large
// copies before it (CUDA then saw only the rest, where the failed copy stood first) or not.
bool failed_copy_is_named() {
  CUdeviceptr dev = 0;
  CUstream stream = nullptr;
  if (cuMemAlloc(&dev, 8u << 20) != CUDA_SUCCESS || cuStreamCreate(&stream, 0) != CUDA_SUCCESS)
    return false;
  std::vector<unsigned char> host(8u << 20, 7);
  CUdeviceptr dsts[3] = {dev + (4u << 20), dev, dev + 100};
  CUdeviceptr srcs[3] = {addr(host.data() + (4u << 20)), addr(host.data()), addr(host.data())};
  size_t sizes[3] = {4u << 20, 3u << 20, 0};
  CUmemcpyAttributes attrs{};
  attrs.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  size_t first = 0, failed_at = 12345;
  const CUresult r = batch_v1(dsts, srcs, sizes, 3, &attrs, &first, 1, &failed_at, stream);
  cuStreamSynchronize(stream);
  if (r == CUDA_SUCCESS || failed_at != 2) {
    std::fprintf(stderr, "a failed batch copy: result %d, failIdx %zu (expected an error at 2)\n",
                 static_cast<int>(r), failed_at);
    return false;
  }
  return true;
}

// The same entry with every copy fine (and large: cmt takes them all, CUDA sees none): failIdx
// reads SIZE_MAX afterwards, as CUDA 12.8 writes it on success (measured on the H200,
// tests/failidx.sh), not whatever the program left there.
bool success_leaves_no_index() {
  CUdeviceptr dev = 0;
  CUstream stream = nullptr;
  if (cuMemAlloc(&dev, 8u << 20) != CUDA_SUCCESS || cuStreamCreate(&stream, 0) != CUDA_SUCCESS)
    return false;
  std::vector<unsigned char> host(8u << 20, 9);
  CUdeviceptr dsts[2] = {dev + (4u << 20), dev};
  CUdeviceptr srcs[2] = {addr(host.data() + (4u << 20)), addr(host.data())};
  size_t sizes[2] = {4u << 20, 3u << 20};
  CUmemcpyAttributes attrs{};
  attrs.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  size_t first = 0, failed_at = 12345;
  const CUresult r = batch_v1(dsts, srcs, sizes, 2, &attrs, &first, 1, &failed_at, stream);
  cuStreamSynchronize(stream);
  if (r != CUDA_SUCCESS || failed_at != SIZE_MAX) {
    std::fprintf(stderr, "a good batch: result %d, failIdx %zu (expected success, SIZE_MAX)\n",
                 static_cast<int>(r), failed_at);
    return false;
  }
  return true;
}

// One copy on a thread of its own whose cancellation is pending: whether it returned with every
// byte right and the thread was then cancelled.
struct PendingCopy {
  CUdeviceptr dev;
  std::vector<unsigned char>* host;
  bool to_device;
  bool returned = false, right = false;
};

void* copy_with_cancel_pending(void* arg) {
  auto* c = static_cast<PendingCopy*>(arg);
  pthread_cancel(pthread_self());  // deferred: pending until a cancellation point
  std::vector<unsigned char>& h = *c->host;
  const CUresult r = c->to_device ? cuMemcpyHtoD(c->dev, h.data(), h.size())
                                  : cuMemcpyDtoH(h.data(), c->dev, h.size());
  c->returned = true;
  c->right = r == CUDA_SUCCESS;
  pthread_testcancel();
  c->right = false;  // not cancelled
  return nullptr;
}

bool copies_with_cancellation_pending() {
  std::vector<unsigned char> out((24u << 20) + 5), back(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<unsigned char>(i * 11 + 3);
  CUdeviceptr dev = 0;
  if (cuMemAlloc(&dev, out.size()) != CUDA_SUCCESS) return false;
  bool ok = true;
  for (int k = 0; k < 6; ++k) {
    PendingCopy c{dev, k % 2 == 0 ? &out : &back, k % 2 == 0};
    pthread_t th;
    void* result = nullptr;
    if (pthread_create(&th, nullptr, copy_with_cancel_pending, &c) != 0 ||
        pthread_join(th, &result) != 0)
      return false;
    if (result != PTHREAD_CANCELED || !c.returned || !c.right) {
      std::fprintf(stderr,
                   "copy %d with a cancellation pending: cancelled %d, returned %d, ok %d\n", k,
                   result == PTHREAD_CANCELED, c.returned, c.right);
      ok = false;
    }
    if (k % 2 == 1 && back != out) {
      std::fprintf(stderr, "copy %d with a cancellation pending: wrong bytes\n", k);
      ok = false;
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc == 5 ? argv[4] : "";
  const bool peer = std::strcmp(mode, "peer") == 0 || std::strcmp(mode, "peer-reset") == 0;
  const bool forks = std::strcmp(mode, "fork") == 0;
  const bool resets = std::strcmp(mode, "reset") == 0 || std::strcmp(mode, "peer-reset") == 0;
  const bool greens = std::strcmp(mode, "green") == 0;
  const bool unseen = std::strcmp(mode, "unseen") == 0;
  const bool cancels = std::strcmp(mode, "cancel") == 0;
  if (argc != 4 && !(argc == 5 && (peer || forks || resets || greens || unseen || cancels))) {
    std::fprintf(stderr,
                 "usage: %s THREADS ROUNDS SEED [peer|fork|reset|peer-reset|green|unseen|cancel]\n",
                 argv[0]);
    return 2;
  }
  int threads = std::atoi(argv[1]), rounds = std::atoi(argv[2]);
  unsigned seed = static_cast<unsigned>(std::strtoul(argv[3], nullptr, 10));
  if (cuInit(0) != CUDA_SUCCESS) return 2;
  if (cancels && !copies_with_cancellation_pending()) g_wrong.fetch_add(1);
  if (!peer && !failed_copy_is_named()) g_wrong.fetch_add(1);
  if (!peer && !success_leaves_no_index()) g_wrong.fetch_add(1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(peer ? peer_worker : worker, t, rounds, seed);
  for (auto& t : pool) t.join();
  if (forks) {
    std::fflush(stdout);
    const pid_t child = fork();
    if (child < 0) return 2;
    if (child == 0) {
      std::vector<char> a(8u << 20, 'a'), b(8u << 20);
      std::memcpy(b.data(), a.data(), a.size());
      std::exit(b == a ? 0 : 1);  // exit, not _exit: the atexit handlers run
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      g_wrong.fetch_add(1);
    worker(0, rounds, seed + 2);
  }
  for (unsigned k = 0; resets && k < 4; ++k) {
    if (cuDevicePrimaryCtxReset(peer ? static_cast<CUdevice>(k % 2) : 0) != CUDA_SUCCESS)
      g_wrong.fetch_add(1);
    (peer ? peer_worker : worker)(0, rounds, seed + 3 + k);
  }
  for (unsigned k = 0; unseen && k < 4; ++k) {
    fake_cuda_end_context_unseen(0);
    worker(0, rounds, seed + 3 + k);
  }
  for (unsigned k = 0; greens && k < 4; ++k) {
    CUgreenCtx green = nullptr;
    CUcontext ctx = nullptr;
    if (cuGreenCtxCreate(&green, nullptr, 0, 0) != CUDA_SUCCESS ||
        cuCtxFromGreenCtx(&ctx, green) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
      return 2;
    worker(0, rounds, seed + 3 + k);
    if (cuGreenCtxDestroy(green) != CUDA_SUCCESS) g_wrong.fetch_add(1);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  long dmas = 0, enqueues = 0, queries = 0, records = 0, registers = 0;
  fake_cuda_counts(&dmas, &enqueues, &queries, &records, &registers);
  // A handle of a context that ended must never reach the driver again.
  if (const long dead = fake_cuda_dead_handle_calls()) {
    std::fprintf(stderr, "%ld calls on handles of an ended context\n", dead);
    g_wrong.fetch_add(1);
  }
  std::printf(
      "trips %ld ok %ld failed %ld wrong %ld max_rss_mb %ld dmas %ld enqueues %ld queries %ld "
      "records %ld registers %ld\n",
      static_cast<long>(threads) * rounds, g_ok.load(), g_failed.load(), g_wrong.load(),
      ru.ru_maxrss / 1024, dmas, enqueues, queries, records, registers);
  return g_wrong.load() == 0 ? 0 : 1;
}
