// A fake CUDA driver for CPU tests: host memory stands in for device memory, and each stream is a
// thread that runs its queue of DMAs, event records and event waits later, after random delays,
// so completion runs out of step with submission as on a real copy engine. DMAs read their source
// when they run, so a staging buffer reused too early shows up as wrong bytes. Faults can be
// injected. It has `devices` GPUs, each with one (primary) context, current per thread (device 0's
// by default); a stream or event belongs to the context current when it was made, and recording
// an event on another context's stream fails, as in CUDA. No GPU reaches another's memory unless
// the test says so (peer_access).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda/driver_api.h"

namespace cmt::fake {

struct Faults {
  CUresult host_register = CUDA_SUCCESS;  // returned by cuMemHostRegister
  int host_register_us = 0;               // how long cuMemHostRegister takes (pinning pages)
  CUresult event_create = CUDA_SUCCESS;
  long dma_fail_at = -1;  // the n-th DMA enqueue (from 0) fails...
  CUresult dma_fail_code = CUDA_ERROR_ILLEGAL_ADDRESS;
  long query_fail_at = -1;  // the n-th event query (from 0) fails...
  CUresult query_fail_code = CUDA_ERROR_LAUNCH_FAILED;
  long record_fail_at = -1;     // the n-th event record (from 0) fails
  long query_fail_record = -1;  // queries of the event the n-th record (from 0) made fail
  long query_fail_from = -1;    // every event query from the n-th (from 0) on fails
  bool no_context = false;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  // Another thread is capturing a graph in global mode: a call that CUDA may count as unsafe,
  // made by a thread whose capture mode is not relaxed, is counted in unsafe_calls (in CUDA it
  // would invalidate that capture).
  bool global_capture_elsewhere = false;
};

class FakeStream;

// The context of fake device `device`.
CUcontext fake_context(int device);

class FakeDriver {
 public:
  // Installs this fake as the one the DriverApi table talks to; one at a time.
  explicit FakeDriver(int max_delay_us = 30);
  ~FakeDriver();

  const DriverApi& api() const;

  CUdeviceptr alloc_device(std::size_t bytes, int device = 0);
  void* alloc_pinned(std::size_t bytes);  // like cuMemHostAlloc: known to the driver as host
  CUstream create_stream();
  void synchronize_all();
  // A copy as the driver's own copy functions make it: queued on `stream`, and waited for if
  // `sync`. Not counted in dma_count or dmas_run, which count the engine's DMAs.
  void run_copy(CUstream stream, void* dst, const void* src, std::size_t n, bool sync);
  // Whether [p, p + n) lies in one pinned or registered range (CUDA would copy it as pinned).
  bool pinned(const void* p, std::size_t n);
  // Holds every stream's queue before its next operation (DMAs, event records) until resumed.
  void pause_streams(bool paused);
  // `ctx` ends and a new context takes its handle, as a real driver may hand out the same one:
  // the streams and events made in it before are dead from now on, and a call that passes one
  // fails as CUDA's would and is counted in dead_handle_calls.
  void end_context(CUcontext ctx);
  std::size_t destroyed_event_count();  // cuEventDestroy calls so far

  Faults faults;
  int devices = 1;
  bool peer_access[4][4] = {};  // [from][to]: GPU `from` may reach GPU `to`'s memory
  // A driver whose access flags do not show peer access (the device-address query still does).
  bool access_flags_blind = false;
  std::atomic<long> waits{0};   // cuStreamWaitEvent calls
  std::atomic<long> syncs{0};   // cuStreamSynchronize calls
  std::string pci_bus_id;  // what cuDeviceGetPCIBusId answers; empty: not supported
  std::atomic<long> dma_count{0}, query_count{0}, record_count{0}, register_count{0};
  std::atomic<long> pointer_queries{0};  // cuPointerGetAttributes calls
  std::atomic<int> unregister_wait_ms{0};  // how long cuMemHostUnregister takes (the GPU's work)
  CUcontext last_unregister_context = nullptr;  // current at the last cuMemHostUnregister (mu)
  std::atomic<long> unsafe_calls{0};
  std::atomic<long> dead_handle_calls{0};  // calls on a handle of an ended context (end_context)
  std::atomic<long> streams_destroyed{0};  // cuStreamDestroy calls
  std::atomic<long> dmas_run{0};
  // Where each of the engine's DMAs writes, in the order they were enqueued (under `mu`).
  std::vector<void*> dma_destinations;
  // Asynchronous copies whose host side was not all in one pinned or registered range (CUDA
  // would have taken them as pageable).
  std::atomic<long> unpinned_async{0};
  int max_delay_us;

  // Internals used by the DriverApi functions.
  FakeStream* stream_for(CUstream handle);
  std::mutex mu;
  std::map<std::uintptr_t, std::size_t> device_ranges, host_ranges;
  std::map<std::uintptr_t, int> device_owner;     // device allocation -> its GPU
  std::map<FakeStream*, CUcontext> stream_context;  // streams made by cuStreamCreate
  // How often each context ended (end_context), and for each stream made by cuStreamCreate, how
  // often its context had ended when it was made: a handle of an earlier generation is dead.
  std::map<CUcontext, int> context_generation;
  std::map<FakeStream*, int> stream_generation;
  std::vector<CUevent> destroyed_events;  // cuEventDestroy calls
  // Every event made, freed with the driver (one of an ended context is never destroyed).
  std::vector<CUevent> created_events;
  std::vector<std::unique_ptr<char[]>> device_memory;
  std::vector<std::unique_ptr<FakeStream>> streams;
  std::map<std::pair<std::thread::id, CUcontext>, FakeStream*> per_thread;
  std::map<CUcontext, FakeStream*> legacy_of;  // each context's legacy default stream
  FakeStream* legacy = nullptr;                // device 0's
};

// Ranges registered with cuMemHostRegister and not yet unregistered, kept without a lock (a signal
// handler asks): whether one overlaps [lo, hi).
bool registered_overlap(std::uintptr_t lo, std::uintptr_t hi);

// CMT_FAKE_CUDA's check_releases (fake_release_check.cpp): from now on every system call that
// gives back or replaces pages is checked against the registered ranges, and the count printed
// at exit. False if it cannot be installed.
bool install_release_check();

}  // namespace cmt::fake
