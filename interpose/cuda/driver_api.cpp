#include "cuda/driver_api.h"

#include <dlfcn.h>

#include <mutex>

#include "common/log.h"
#include "cuda/real_dl.h"

namespace cmt {
namespace {

// Entry points are requested as of this CUDA version, so their ABI stays fixed whatever driver
// runs underneath; legacy-stream variants, since cmt always passes explicit stream handles.
constexpr int kAbiVersion = 12000;

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

template <typename Fn>
bool fetch(GetProcAddress get, const char* name, Fn* out) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (get(name, &fn, kAbiVersion, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS ||
      status != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {
    CMT_WARN_ONCE("the CUDA driver lacks {}; cmt forwards every copy", name);
    return false;
  }
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

const DriverApi* load() {
  // RTLD_NOLOAD first: a process that never loaded the driver is not made to load it here.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  // The real one: libcmt.so's dlsym and cuGetProcAddress hooks would hand back its own hooks,
  // and the engine would call itself.
  auto get = reinterpret_cast<GetProcAddress>(real_dlsym(lib, "cuGetProcAddress_v2"));
  if (!get) return nullptr;
  static DriverApi api{};
  bool ok = fetch(get, "cuCtxGetCurrent", &api.ctx_get_current) &&
            fetch(get, "cuCtxGetDevice", &api.ctx_get_device) &&
            fetch(get, "cuStreamGetCtx", &api.stream_get_ctx) &&
            fetch(get, "cuStreamIsCapturing", &api.stream_is_capturing) &&
            fetch(get, "cuStreamSynchronize", &api.stream_synchronize) &&
            fetch(get, "cuThreadExchangeStreamCaptureMode", &api.thread_exchange_capture_mode) &&
            fetch(get, "cuPointerGetAttributes", &api.pointer_get_attributes) &&
            fetch(get, "cuMemGetAddressRange", &api.mem_get_address_range) &&
            fetch(get, "cuMemHostRegister", &api.mem_host_register) &&
            fetch(get, "cuMemHostUnregister", &api.mem_host_unregister) &&
            fetch(get, "cuMemcpyHtoDAsync", &api.memcpy_htod_async) &&
            fetch(get, "cuMemcpyDtoHAsync", &api.memcpy_dtoh_async) &&
            fetch(get, "cuEventCreate", &api.event_create) &&
            fetch(get, "cuEventRecord", &api.event_record) &&
            fetch(get, "cuEventQuery", &api.event_query) &&
            fetch(get, "cuEventDestroy", &api.event_destroy) &&
            fetch(get, "cuDeviceGetPCIBusId", &api.device_get_pci_bus_id);
  return ok ? &api : nullptr;
}

}  // namespace

const DriverApi* real_driver() {
  static std::once_flag once;
  static const DriverApi* api = nullptr;
  std::call_once(once, [] { api = load(); });
  return api;
}

}  // namespace cmt
