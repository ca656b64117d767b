#include "fake_driver.h"

#include <chrono>
#include <cstring>
#include <random>
#include <utility>

namespace cmt::fake {

// While set, no stream runs its next operation (FakeDriver::pause_streams).
std::atomic<bool> g_streams_paused{false};

class FakeStream {
 public:
  explicit FakeStream(int max_delay_us) : max_delay_us_(max_delay_us) {
    thread_ = std::thread([this] { run(); });
  }
  ~FakeStream() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void enqueue(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ops_.push_back(std::move(op));
      ++queued_;
    }
    cv_.notify_all();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [this] { return done_ == queued_; });
  }

 private:
  void run() {
    std::mt19937 rng(static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(this)));
    for (;;) {
      std::function<void()> op;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [this] { return stop_ || !ops_.empty(); });
        if (ops_.empty()) return;
        op = std::move(ops_.front());
        ops_.pop_front();
      }
      if (max_delay_us_ > 0)
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % (max_delay_us_ + 1)));
      while (g_streams_paused.load())
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      op();
      {
        std::lock_guard<std::mutex> lk(mu_);
        ++done_;
      }
      done_cv_.notify_all();
    }
  }
  int max_delay_us_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::function<void()>> ops_;
  long queued_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

namespace {

FakeDriver* g_fake = nullptr;
constexpr std::uintptr_t kCtxBase = 0xC0;
CUcontext const kCtx = reinterpret_cast<CUcontext>(kCtxBase);  // device 0's
thread_local CUcontext t_current = kCtx;

int device_of(CUcontext c) {
  return static_cast<int>(reinterpret_cast<std::uintptr_t>(c) - kCtxBase);
}
CUcontext current() {
  return g_fake->faults.no_context ? nullptr : t_current;
}

struct FakeEvent {
  std::atomic<long> recorded{0}, completed{0};
  std::atomic<std::int64_t> completed_ns{0};  // steady clock, when its latest record ran
  std::atomic<long> failing_gen{-1};  // queries fail while this record is the latest
  CUcontext ctx = nullptr;
  int generation = 0;  // of its context, when it was made (FakeDriver::end_context)
};

// The context a stream handle belongs to: the current one for the default-stream handles.
CUcontext context_of_stream(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return current();
  std::lock_guard<std::mutex> lk(g_fake->mu);
  auto it = g_fake->stream_context.find(reinterpret_cast<FakeStream*>(s));
  return it == g_fake->stream_context.end() ? kCtx : it->second;
}

int generation_of(CUcontext ctx) {  // with g_fake->mu held
  auto it = g_fake->context_generation.find(ctx);
  return it == g_fake->context_generation.end() ? 0 : it->second;
}

// Whether a handle made in `ctx` when it was of `generation` died with it; counted if so.
bool dead(CUcontext ctx, int generation) {
  std::lock_guard<std::mutex> lk(g_fake->mu);
  if (generation_of(ctx) == generation) return false;
  g_fake->dead_handle_calls.fetch_add(1);
  return true;
}
bool dead(CUevent e) {
  const auto* ev = reinterpret_cast<const FakeEvent*>(e);
  return dead(ev->ctx, ev->generation);
}
// The default streams' handles name whichever context is current: never dead.
bool dead(CUstream s) {
  CUcontext ctx = nullptr;
  int generation = 0;
  {
    std::lock_guard<std::mutex> lk(g_fake->mu);
    auto it = g_fake->stream_generation.find(reinterpret_cast<FakeStream*>(s));
    if (it == g_fake->stream_generation.end()) return false;
    ctx = g_fake->stream_context[it->first];
    generation = it->second;
  }
  return dead(ctx, generation);
}

bool lookup(const std::map<std::uintptr_t, std::size_t>& ranges, std::uintptr_t p,
            std::uintptr_t* base, std::size_t* size) {
  auto it = ranges.upper_bound(p);
  if (it == ranges.begin()) return false;
  --it;
  if (p >= it->first + it->second) return false;
  *base = it->first;
  *size = it->second;
  return true;
}

CUresult ctx_get_current(CUcontext* c) {
  *c = current();
  return CUDA_SUCCESS;
}
CUresult ctx_set_current(CUcontext c) {
  if (c && (device_of(c) < 0 || device_of(c) >= g_fake->devices)) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = c ? c : kCtx;
  return CUDA_SUCCESS;
}
CUresult ctx_get_device(CUdevice* d) {
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  *d = device_of(current());
  return CUDA_SUCCESS;
}
// Unique for each context a handle names: its GPU and how often the handle's context ended.
CUresult ctx_get_id(CUcontext c, unsigned long long* id) {
  if (!c || device_of(c) < 0 || device_of(c) >= g_fake->devices) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lk(g_fake->mu);
  *id = static_cast<unsigned long long>(generation_of(c)) * 256 + device_of(c) + 1;
  return CUDA_SUCCESS;
}
CUresult stream_get_ctx(CUstream s, CUcontext* c) {
  *c = context_of_stream(s);
  return CUDA_SUCCESS;
}
CUresult device_get(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal >= g_fake->devices) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult mem_pool_get_access(CUmemAccess_flags*, CUmemoryPool, CUmemLocation*) {
  return CUDA_ERROR_INVALID_VALUE;  // the fake has no pools
}
CUresult device_get_count(int* n) {
  *n = g_fake->devices;
  return CUDA_SUCCESS;
}
CUresult primary_ctx_get_state(CUdevice d, unsigned* flags, int* active) {
  if (d < 0 || d >= g_fake->devices) return CUDA_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = 1;
  return CUDA_SUCCESS;
}
CUresult primary_ctx_retain(CUcontext* c, CUdevice d) {
  if (d < 0 || d >= g_fake->devices) return CUDA_ERROR_INVALID_DEVICE;
  *c = fake_context(d);
  return CUDA_SUCCESS;
}
CUresult primary_ctx_release(CUdevice) {
  return CUDA_SUCCESS;
}
CUresult stream_is_capturing(CUstream, CUstreamCaptureStatus* s) {
  *s = g_fake->faults.capture;
  return CUDA_SUCCESS;
}
CUresult exchange_capture_mode(CUstreamCaptureMode* mode);
void unsafe_call();
CUresult stream_synchronize(CUstream s) {
  unsafe_call();
  if (dead(s)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  g_fake->syncs.fetch_add(1);
  g_fake->stream_for(s)->synchronize();
  return CUDA_SUCCESS;
}
thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

CUresult exchange_capture_mode(CUstreamCaptureMode* mode) {
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}

// A call CUDA may count as unsafe during another thread's global-mode capture.
void unsafe_call() {
  if (g_fake->faults.global_capture_elsewhere && t_capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    g_fake->unsafe_calls.fetch_add(1);
}

CUresult pointer_get_attributes(unsigned n, CUpointer_attribute* attrs, void** data,
                                CUdeviceptr ptr) {
  g_fake->pointer_queries.fetch_add(1);
  std::lock_guard<std::mutex> lk(g_fake->mu);
  std::uintptr_t base;
  std::size_t size;
  bool device = lookup(g_fake->device_ranges, ptr, &base, &size);
  bool host = !device && lookup(g_fake->host_ranges, ptr, &base, &size);
  const int owner = device ? g_fake->device_owner[base] : 0;
  const int viewer = current() ? device_of(current()) : -1;
  for (unsigned i = 0; i < n; ++i) {
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned*>(data[i]) = device ? unsigned{CU_MEMORYTYPE_DEVICE}
                                           : host ? unsigned{CU_MEMORYTYPE_HOST}
                                                  : 0u;
        break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<unsigned*>(data[i]) = 0;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data[i]) = device ? owner : host ? 0 : -2;
        break;
      case CU_POINTER_ATTRIBUTE_CONTEXT:
        *static_cast<CUcontext*>(data[i]) = device ? fake_context(owner) : nullptr;
        break;
      case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *static_cast<CUmemoryPool*>(data[i]) = nullptr;
        break;
      case CU_POINTER_ATTRIBUTE_HOST_POINTER:  // pageable or host memory: the address itself
        if (device) return CUDA_ERROR_INVALID_VALUE;
        *static_cast<CUdeviceptr*>(data[i]) = ptr;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:  // given only to a context that reaches it
        if (!(device && (viewer == owner || (viewer >= 0 && g_fake->peer_access[viewer][owner]))))
          return CUDA_ERROR_INVALID_VALUE;
        *static_cast<CUdeviceptr*>(data[i]) = ptr;
        break;
      case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
        *static_cast<unsigned*>(data[i]) =
            host || viewer == owner ||
                    (viewer >= 0 && g_fake->peer_access[viewer][owner] && !g_fake->access_flags_blind)
                ? unsigned{CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE}
                : unsigned{CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE};
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

CUresult mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  std::lock_guard<std::mutex> lk(g_fake->mu);
  std::uintptr_t b;
  std::size_t s;
  if (!lookup(g_fake->device_ranges, ptr, &b, &s)) return CUDA_ERROR_NOT_FOUND;
  *base = b;
  *size = s;
  return CUDA_SUCCESS;
}

// Registered ranges, lock-free, for registered_overlap.
constexpr int kMostRegistered = 4096;
constexpr std::uintptr_t kPage = 4096;
std::atomic<std::uintptr_t> g_reg_lo[kMostRegistered], g_reg_hi[kMostRegistered];

void note_registered(std::uintptr_t lo, std::size_t bytes) {
  for (int i = 0; i < kMostRegistered; ++i) {
    std::uintptr_t none = 0;
    if (g_reg_lo[i].compare_exchange_strong(none, lo)) {
      g_reg_hi[i].store(lo + bytes, std::memory_order_release);
      return;
    }
  }
}

void note_unregistered(std::uintptr_t lo) {
  for (int i = 0; i < kMostRegistered; ++i)
    if (g_reg_lo[i].load() == lo) {
      g_reg_hi[i].store(0);
      g_reg_lo[i].store(0, std::memory_order_release);
      return;
    }
}

CUresult mem_host_register(void* p, size_t bytes, unsigned) {
  unsafe_call();
  if (g_fake->faults.host_register != CUDA_SUCCESS) return g_fake->faults.host_register;
  if (g_fake->faults.host_register_us > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(g_fake->faults.host_register_us));
  g_fake->register_count.fetch_add(1);
  std::lock_guard<std::mutex> lk(g_fake->mu);
  // As CUDA: whole pages are registered, and a page registered already makes the call fail.
  const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(p) / kPage * kPage;
  bytes = (reinterpret_cast<std::uintptr_t>(p) + bytes + kPage - 1) / kPage * kPage - lo;
  for (const auto& [base, size] : g_fake->host_ranges)
    if (base < lo + bytes && lo < base + size) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  g_fake->host_ranges[lo] = bytes;
  note_registered(lo, bytes);
  return CUDA_SUCCESS;
}
CUresult mem_host_unregister(void* p) {
  // As CUDA's, which waits for every kernel queued on the GPU (bench/lab/NOTES.md 59).
  if (const int ms = g_fake->unregister_wait_ms.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  std::lock_guard<std::mutex> lk(g_fake->mu);
  g_fake->last_unregister_context = current();
  const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(p) / kPage * kPage;
  if (!g_fake->host_ranges.erase(lo)) return CUDA_ERROR_NOT_FOUND;
  note_unregistered(lo);
  return CUDA_SUCCESS;
}

CUresult enqueue_dma(CUstream s, void* dst, const void* src, size_t n) {
  unsafe_call();
  // Stricter than CUDA may be: a copy is enqueued with its stream's context current.
  if (context_of_stream(s) != current()) return CUDA_ERROR_INVALID_CONTEXT;
  if (dead(s)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  long i = g_fake->dma_count.fetch_add(1);
  if (i == g_fake->faults.dma_fail_at) return g_fake->faults.dma_fail_code;
  {
    std::lock_guard<std::mutex> lk(g_fake->mu);
    g_fake->dma_destinations.push_back(dst);
  }
  g_fake->stream_for(s)->enqueue([dst, src, n] {
    std::memcpy(dst, src, n);  // reads the source now, not at submission
    g_fake->dmas_run.fetch_add(1);
  });
  return CUDA_SUCCESS;
}
void count_unpinned(const void* host, size_t n) {
  std::lock_guard<std::mutex> lk(g_fake->mu);
  std::uintptr_t base;
  std::size_t size;
  const auto p = reinterpret_cast<std::uintptr_t>(host);
  if (!lookup(g_fake->host_ranges, p, &base, &size) || p + n > base + size)
    g_fake->unpinned_async.fetch_add(1);
}
CUresult memcpy_htod_async(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  count_unpinned(src, n);
  return enqueue_dma(s, reinterpret_cast<void*>(dst), src, n);
}
CUresult memcpy_dtoh_async(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  count_unpinned(dst, n);
  return enqueue_dma(s, dst, reinterpret_cast<const void*>(src), n);
}

CUresult event_create(CUevent* e, unsigned) {
  unsafe_call();
  if (g_fake->faults.event_create != CUDA_SUCCESS) return g_fake->faults.event_create;
  auto* ev = new FakeEvent();
  ev->ctx = current();
  {
    std::lock_guard<std::mutex> lk(g_fake->mu);
    ev->generation = generation_of(ev->ctx);
    g_fake->created_events.push_back(reinterpret_cast<CUevent>(ev));
  }
  *e = reinterpret_cast<CUevent>(ev);
  return CUDA_SUCCESS;
}
CUresult event_record(CUevent e, CUstream s) {
  unsafe_call();
  long i = g_fake->record_count.fetch_add(1);
  if (i == g_fake->faults.record_fail_at) return CUDA_ERROR_INVALID_HANDLE;
  if (dead(e) || dead(s)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (ev->ctx != context_of_stream(s)) return CUDA_ERROR_INVALID_HANDLE;  // as CUDA
  long gen = ev->recorded.fetch_add(1) + 1;
  if (i == g_fake->faults.query_fail_record) ev->failing_gen.store(gen);
  g_fake->stream_for(s)->enqueue([ev, gen] {
    ev->completed_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count());
    long cur = ev->completed.load();
    while (cur < gen && !ev->completed.compare_exchange_weak(cur, gen)) {
    }
  });
  return CUDA_SUCCESS;
}
CUresult event_query(CUevent e) {
  unsafe_call();
  long i = g_fake->query_count.fetch_add(1);
  if (i == g_fake->faults.query_fail_at) return g_fake->faults.query_fail_code;
  if (g_fake->faults.query_fail_from >= 0 && i >= g_fake->faults.query_fail_from)
    return g_fake->faults.query_fail_code;
  if (dead(e)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  if (ev->recorded.load() == ev->failing_gen.load()) return g_fake->faults.query_fail_code;
  return ev->completed.load() >= ev->recorded.load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
// As CUDA: both events completed, the time between them in ms, else CUDA_ERROR_NOT_READY.
CUresult event_elapsed_time(float* ms, CUevent start, CUevent end) {
  auto* a = reinterpret_cast<FakeEvent*>(start);
  auto* b = reinterpret_cast<FakeEvent*>(end);
  if (a->completed.load() < a->recorded.load() || b->completed.load() < b->recorded.load())
    return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(static_cast<double>(b->completed_ns.load() - a->completed_ns.load()) /
                           1e6);
  return CUDA_SUCCESS;
}
// The stream's later work waits until the event's latest record (at the time of this call) ran.
CUresult stream_wait_event(CUstream s, CUevent e, unsigned) {
  unsafe_call();
  g_fake->waits.fetch_add(1);
  if (dead(e) || dead(s)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  auto* ev = reinterpret_cast<FakeEvent*>(e);
  const long gen = ev->recorded.load();
  g_fake->stream_for(s)->enqueue([ev, gen] {
    while (ev->completed.load() < gen) std::this_thread::sleep_for(std::chrono::microseconds(2));
  });
  return CUDA_SUCCESS;
}
CUresult stream_create(CUstream* s, unsigned) {
  unsafe_call();
  std::lock_guard<std::mutex> lk(g_fake->mu);
  g_fake->streams.push_back(std::make_unique<FakeStream>(g_fake->max_delay_us));
  FakeStream* fs = g_fake->streams.back().get();
  g_fake->stream_context[fs] = current();
  g_fake->stream_generation[fs] = generation_of(current());
  *s = reinterpret_cast<CUstream>(fs);
  return CUDA_SUCCESS;
}
// Its queued work still runs; the stream is freed with the driver.
CUresult stream_destroy(CUstream s) {
  unsafe_call();
  if (dead(s)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  g_fake->streams_destroyed.fetch_add(1);
  return CUDA_SUCCESS;
}
// As in CUDA, an event may be destroyed while a record of it or a wait for it is still queued:
// it is freed with the driver.
CUresult event_destroy(CUevent e) {
  if (dead(e)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;  // the driver freed it with its context
  std::lock_guard<std::mutex> lk(g_fake->mu);
  g_fake->destroyed_events.push_back(e);
  return CUDA_SUCCESS;
}
CUresult device_get_pci_bus_id(char* out, int len, CUdevice) {
  const std::string& id = g_fake->pci_bus_id;
  if (id.empty() || len <= static_cast<int>(id.size())) return CUDA_ERROR_NOT_SUPPORTED;
  std::memcpy(out, id.c_str(), id.size() + 1);
  return CUDA_SUCCESS;
}

CUresult mem_alloc_host(void** p, size_t bytes) {
  *p = g_fake->alloc_pinned(bytes);
  return CUDA_SUCCESS;
}
CUresult mem_free_host(void*) { return CUDA_SUCCESS; }  // kept until the fake goes

DriverApi make_api() {
  DriverApi a;
  a.mem_alloc_host = mem_alloc_host;
  a.mem_free_host = mem_free_host;
  a.ctx_get_current = ctx_get_current;
  a.ctx_get_device = ctx_get_device;
  a.ctx_get_id = ctx_get_id;
  a.stream_get_ctx = stream_get_ctx;
  a.stream_is_capturing = stream_is_capturing;
  a.stream_synchronize = stream_synchronize;
  a.thread_exchange_capture_mode = exchange_capture_mode;
  a.pointer_get_attributes = pointer_get_attributes;
  a.mem_get_address_range = mem_get_address_range;
  a.mem_host_register = mem_host_register;
  a.mem_host_unregister = mem_host_unregister;
  a.memcpy_htod_async = memcpy_htod_async;
  a.memcpy_dtoh_async = memcpy_dtoh_async;
  a.event_create = event_create;
  a.event_record = event_record;
  a.event_query = event_query;
  a.event_destroy = event_destroy;
  a.event_elapsed_time = event_elapsed_time;
  a.device_get_pci_bus_id = device_get_pci_bus_id;
  a.ctx_set_current = ctx_set_current;
  a.stream_create = stream_create;
  a.stream_destroy = stream_destroy;
  a.stream_wait_event = stream_wait_event;
  a.device_get = device_get;
  a.device_get_count = device_get_count;
  a.mem_pool_get_access = mem_pool_get_access;
  a.primary_ctx_get_state = primary_ctx_get_state;
  a.primary_ctx_retain = primary_ctx_retain;
  a.primary_ctx_release = primary_ctx_release;
  return a;
}
const DriverApi kApi = make_api();

}  // namespace

CUcontext fake_context(int device) {
  return reinterpret_cast<CUcontext>(kCtxBase + static_cast<std::uintptr_t>(device));
}

void FakeDriver::pause_streams(bool paused) {
  g_streams_paused.store(paused);
}

FakeDriver::FakeDriver(int max_delay) : max_delay_us(max_delay) {
  g_streams_paused.store(false);
  g_fake = this;
  streams.push_back(std::make_unique<FakeStream>(max_delay_us));
  legacy = streams.back().get();
  legacy_of[kCtx] = legacy;
}

FakeDriver::~FakeDriver() {
  synchronize_all();
  streams.clear();
  for (CUevent e : created_events) delete reinterpret_cast<FakeEvent*>(e);
  g_fake = nullptr;
}

const DriverApi& FakeDriver::api() const {
  return kApi;
}

CUdeviceptr FakeDriver::alloc_device(std::size_t bytes, int device) {
  std::lock_guard<std::mutex> lk(mu);
  device_memory.emplace_back(new char[bytes + 1]);
  auto p = reinterpret_cast<std::uintptr_t>(device_memory.back().get());
  device_ranges[p] = bytes;
  device_owner[p] = device;
  return p;
}

void* FakeDriver::alloc_pinned(std::size_t bytes) {
  std::lock_guard<std::mutex> lk(mu);
  device_memory.emplace_back(new char[bytes + 1]);
  auto p = reinterpret_cast<std::uintptr_t>(device_memory.back().get());
  host_ranges[p] = bytes;
  return device_memory.back().get();
}

void FakeDriver::end_context(CUcontext ctx) {
  std::lock_guard<std::mutex> lk(mu);
  ++context_generation[ctx];
}

std::size_t FakeDriver::destroyed_event_count() {
  std::lock_guard<std::mutex> lk(mu);
  return destroyed_events.size();
}

CUstream FakeDriver::create_stream() {
  std::lock_guard<std::mutex> lk(mu);
  streams.push_back(std::make_unique<FakeStream>(max_delay_us));
  return reinterpret_cast<CUstream>(streams.back().get());
}

FakeStream* FakeDriver::stream_for(CUstream handle) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY) {
    const CUcontext ctx = t_current;
    if (ctx == kCtx) return legacy;
    std::lock_guard<std::mutex> lk(mu);
    FakeStream*& s = legacy_of[ctx];
    if (!s) {
      streams.push_back(std::make_unique<FakeStream>(max_delay_us));
      s = streams.back().get();
    }
    return s;
  }
  if (handle == CU_STREAM_PER_THREAD) {
    std::lock_guard<std::mutex> lk(mu);
    FakeStream*& s = per_thread[{std::this_thread::get_id(), t_current}];
    if (!s) {
      streams.push_back(std::make_unique<FakeStream>(max_delay_us));
      s = streams.back().get();
    }
    return s;
  }
  return reinterpret_cast<FakeStream*>(handle);
}

void FakeDriver::run_copy(CUstream stream, void* dst, const void* src, std::size_t n, bool sync) {
  FakeStream* s = stream_for(stream);
  s->enqueue([dst, src, n] { std::memcpy(dst, src, n); });
  if (sync) s->synchronize();
}

bool FakeDriver::pinned(const void* p, std::size_t n) {
  std::lock_guard<std::mutex> lk(mu);
  std::uintptr_t base = 0;
  std::size_t size = 0;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return lookup(host_ranges, a, &base, &size) && a + n <= base + size;
}

void FakeDriver::synchronize_all() {
  std::vector<FakeStream*> all;
  {
    std::lock_guard<std::mutex> lk(mu);
    for (auto& s : streams) all.push_back(s.get());
  }
  for (FakeStream* s : all) s->synchronize();
}

bool registered_overlap(std::uintptr_t lo, std::uintptr_t hi) {
  for (int i = 0; i < kMostRegistered; ++i) {
    const std::uintptr_t a = g_reg_lo[i].load(std::memory_order_acquire);
    const std::uintptr_t b = g_reg_hi[i].load(std::memory_order_acquire);
    if (a && b && a < hi && lo < b) return true;
  }
  return false;
}

}  // namespace cmt::fake
