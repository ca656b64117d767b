// The CUDA driver functions cmt's engine and classifier use, as one table of function pointers.
// The real table is filled once from libcuda.so.1 through cuGetProcAddress (pinned to an ABI
// version); tests hand the engine a fake table instead, so CI exercises the real pipeline.
#pragma once

#include <cuda.h>

namespace cmt {

struct DriverApi {
  CUresult (*ctx_get_current)(CUcontext*);
  CUresult (*ctx_get_device)(CUdevice*);
  CUresult (*stream_get_ctx)(CUstream, CUcontext*);
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*);
  CUresult (*stream_synchronize)(CUstream);
  CUresult (*thread_exchange_capture_mode)(CUstreamCaptureMode*);
  CUresult (*pointer_get_attributes)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
  CUresult (*mem_get_address_range)(CUdeviceptr*, size_t*, CUdeviceptr);
  CUresult (*mem_host_register)(void*, size_t, unsigned);
  CUresult (*mem_host_unregister)(void*);
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*event_create)(CUevent*, unsigned);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*event_query)(CUevent);
  CUresult (*event_destroy)(CUevent);
  CUresult (*device_get_pci_bus_id)(char*, int, CUdevice);
};

// The real driver, loaded on first call; nullptr if libcuda.so.1 or any entry is missing (then
// cmt forwards everything). Thread-safe.
const DriverApi* real_driver();

}  // namespace cmt
