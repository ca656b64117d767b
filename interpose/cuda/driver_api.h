// The CUDA driver functions cmt uses, as one table of function pointers: those the engine and the
// classifier call, and those the tuner adds to open a GPU and measure on it. The real table is
// filled once from libcuda.so.1 through cuGetProcAddress (pinned to an ABI version); tests hand the
// engine a fake table instead, so CI exercises the real pipeline. The engine never calls the
// tuner's entries, so a fake may leave them (and error_name) null.
#pragma once

#include <cuda.h>

#include <string>

// X(libcuda name, member, parameter types...): every entry returns CUresult.
#define CMT_DRIVER_FUNCTIONS(X)                                                                \
  /* the engine and the classifier */                                                          \
  X(cuCtxGetCurrent, ctx_get_current, CUcontext*)                                              \
  X(cuCtxGetDevice, ctx_get_device, CUdevice*)                                                 \
  X(cuStreamGetCtx, stream_get_ctx, CUstream, CUcontext*)                                      \
  X(cuStreamIsCapturing, stream_is_capturing, CUstream, CUstreamCaptureStatus*)                \
  X(cuStreamSynchronize, stream_synchronize, CUstream)                                         \
  X(cuThreadExchangeStreamCaptureMode, thread_exchange_capture_mode, CUstreamCaptureMode*)     \
  X(cuPointerGetAttributes, pointer_get_attributes, unsigned, CUpointer_attribute*, void**,    \
    CUdeviceptr)                                                                               \
  X(cuMemGetAddressRange, mem_get_address_range, CUdeviceptr*, size_t*, CUdeviceptr)           \
  X(cuMemHostRegister, mem_host_register, void*, size_t, unsigned)                             \
  X(cuMemHostUnregister, mem_host_unregister, void*)                                           \
  X(cuMemcpyHtoDAsync, memcpy_htod_async, CUdeviceptr, const void*, size_t, CUstream)          \
  X(cuMemcpyDtoHAsync, memcpy_dtoh_async, void*, CUdeviceptr, size_t, CUstream)                \
  X(cuEventCreate, event_create, CUevent*, unsigned)                                           \
  X(cuEventRecord, event_record, CUevent, CUstream)                                            \
  X(cuEventQuery, event_query, CUevent)                                                        \
  X(cuEventDestroy, event_destroy, CUevent)                                                    \
  X(cuEventElapsedTime, event_elapsed_time, float*, CUevent, CUevent)                          \
  X(cuDeviceGetPCIBusId, device_get_pci_bus_id, char*, int, CUdevice)                          \
  /* GPU-to-GPU copies through the host (engine/peer/peer_copier.h) */                         \
  X(cuCtxSetCurrent, ctx_set_current, CUcontext)                                               \
  X(cuStreamCreate, stream_create, CUstream*, unsigned)                                        \
  X(cuStreamDestroy, stream_destroy, CUstream)                                                 \
  X(cuStreamWaitEvent, stream_wait_event, CUstream, CUevent, unsigned)                         \
  X(cuDeviceGet, device_get, CUdevice*, int)                                                   \
  X(cuDeviceGetCount, device_get_count, int*)                                                  \
  X(cuDevicePrimaryCtxGetState, primary_ctx_get_state, CUdevice, unsigned*, int*)              \
  X(cuDevicePrimaryCtxRetain, primary_ctx_retain, CUcontext*, CUdevice)                        \
  X(cuDevicePrimaryCtxRelease, primary_ctx_release, CUdevice)                                  \
  X(cuMemPoolGetAccess, mem_pool_get_access, CUmemAccess_flags*, CUmemoryPool, CUmemLocation*) \
  X(cuGetErrorName, error_name, CUresult, const char**)                                        \
  /* the tuner: open a GPU, allocate, and time CUDA's own copies */                            \
  X(cuInit, init, unsigned)                                                                    \
  X(cuDeviceGetName, device_get_name, char*, int, CUdevice)                                    \
  X(cuCtxSynchronize, ctx_synchronize, void)                                                   \
  X(cuMemAlloc, mem_alloc, CUdeviceptr*, size_t)                                               \
  X(cuMemFree, mem_free, CUdeviceptr)                                                          \
  X(cuMemAllocHost, mem_alloc_host, void**, size_t)                                            \
  X(cuMemFreeHost, mem_free_host, void*)                                                       \
  X(cuMemcpyHtoD, memcpy_htod, CUdeviceptr, const void*, size_t)                               \
  X(cuMemcpyDtoH, memcpy_dtoh, void*, CUdeviceptr, size_t)

// Entries cmt does without where the driver lacks them (null then): fetched quietly.
#define CMT_DRIVER_OPTIONAL_FUNCTIONS(X)                                                       \
  /* a context's id, unique for the process's life (CUDA 12.0+): interposer/context_watch.h */ \
  X(cuCtxGetId, ctx_get_id, CUcontext, unsigned long long*)

namespace cmt {

struct DriverApi {
#define CMT_DRIVER_MEMBER(name, member, ...) CUresult (*member)(__VA_ARGS__) = nullptr;
  CMT_DRIVER_FUNCTIONS(CMT_DRIVER_MEMBER)
  CMT_DRIVER_OPTIONAL_FUNCTIONS(CMT_DRIVER_MEMBER)
#undef CMT_DRIVER_MEMBER
};

// While it lives, the calling thread's stream-capture mode is relaxed (and then restored): cmt's
// driver calls (allocating and registering staging memory, synchronizing, querying and recording
// events on the caller's own streams) are then allowed while another thread captures a CUDA graph
// in global mode, which would otherwise count them as unsafe and invalidate that capture. They
// never touch a capturing stream: such copies are forwarded (classify).
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const DriverApi& driver) : driver_(driver) {
    ok_ = driver_.thread_exchange_capture_mode(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCaptureMode() {
    if (ok_) driver_.thread_exchange_capture_mode(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  const DriverApi& driver_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool ok_ = false;
};

// While it lives, `ctx` is the calling thread's current context; the one before is restored.
// `ok()` says whether the switch happened. Never throws.
class ScopedContext {
 public:
  ScopedContext(const DriverApi& driver, CUcontext ctx) : driver_(driver) {
    if (driver_.ctx_get_current(&saved_) != CUDA_SUCCESS) return;
    ok_ = saved_ == ctx || driver_.ctx_set_current(ctx) == CUDA_SUCCESS;
    switched_ = ok_ && saved_ != ctx;
  }
  ~ScopedContext() {
    if (switched_) driver_.ctx_set_current(saved_);
  }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  bool ok() const { return ok_; }

 private:
  const DriverApi& driver_;
  CUcontext saved_ = nullptr;
  bool ok_ = false, switched_ = false;
};

// The real driver, loaded on first call; nullptr if libcuda.so.1 or any entry is missing (then
// cmt forwards everything). Thread-safe.
const DriverApi* real_driver();

// "CUDA_ERROR_ILLEGAL_ADDRESS (700)" where the driver can name the error, else "CUDA error 700".
std::string cuda_error_text(const DriverApi& driver, CUresult r);

// A driver call that failed leaves a debug breadcrumb naming the call, its file and line, and the
// error, then stores the error in `*status`. Returns whether it failed. Use CMT_CUDA_FAILED.
bool cuda_call_failed(const DriverApi& driver, CUresult r, const char* call, const char* file,
                      int line, CUresult* status);

}  // namespace cmt

// `if (CMT_CUDA_FAILED(driver, driver.f(...), status)) ...stop...`: the call's text goes into the
// breadcrumb, so a failure in a copy's log says which of the engine's calls it was.
#define CMT_CUDA_FAILED(driver, call, status) \
  ::cmt::cuda_call_failed((driver), (call), #call, __FILE__, __LINE__, &(status))
