#include "cuda_session.h"

#include <dlfcn.h>

#include "cuda/real_dl.h"

namespace cmt {

struct CudaSession::Functions {
  CUresult (*init)(unsigned);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*device_get_name)(char*, int, CUdevice);
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice);
  CUresult (*primary_ctx_release)(CUdevice);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*ctx_synchronize)();
  CUresult (*mem_alloc)(CUdeviceptr*, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*mem_alloc_host)(void**, size_t);
  CUresult (*mem_free_host)(void*);
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, size_t);
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, size_t);
};

namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

template <typename Fn>
bool fetch(GetProcAddress get, const char* name, Fn* out) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (get(name, &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS || !fn)
    return false;
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

std::string describe(CUresult r) {
  return "CUDA error " + std::to_string(static_cast<int>(r));
}

}  // namespace

std::unique_ptr<CudaSession> CudaSession::open(int device, std::size_t device_bytes,
                                               std::string* error) {
  std::unique_ptr<CudaSession> s(new CudaSession());
  s->api_ = real_driver();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto get =
      lib ? reinterpret_cast<GetProcAddress>(real_dlsym(lib, "cuGetProcAddress_v2")) : nullptr;
  if (!s->api_ || !get) {
    *error = "no CUDA driver (libcuda.so.1) on this machine";
    return nullptr;
  }
  s->fn_ = std::make_unique<Functions>();
  Functions& f = *s->fn_;
  if (!fetch(get, "cuInit", &f.init) || !fetch(get, "cuDeviceGet", &f.device_get) ||
      !fetch(get, "cuDeviceGetName", &f.device_get_name) ||
      !fetch(get, "cuDevicePrimaryCtxRetain", &f.primary_ctx_retain) ||
      !fetch(get, "cuDevicePrimaryCtxRelease", &f.primary_ctx_release) ||
      !fetch(get, "cuCtxSetCurrent", &f.ctx_set_current) ||
      !fetch(get, "cuCtxSynchronize", &f.ctx_synchronize) ||
      !fetch(get, "cuMemAlloc", &f.mem_alloc) || !fetch(get, "cuMemFree", &f.mem_free) ||
      !fetch(get, "cuMemAllocHost", &f.mem_alloc_host) ||
      !fetch(get, "cuMemFreeHost", &f.mem_free_host) ||
      !fetch(get, "cuMemcpyHtoD", &f.memcpy_htod) || !fetch(get, "cuMemcpyDtoH", &f.memcpy_dtoh)) {
    *error = "the CUDA driver lacks a function the tuner needs";
    return nullptr;
  }
  CUresult r = f.init(0);
  if (r != CUDA_SUCCESS) {
    *error = "cuInit failed (" + describe(r) + "): no usable NVIDIA GPU";
    return nullptr;
  }
  if ((r = f.device_get(&s->device_, device)) != CUDA_SUCCESS) {
    *error = "no GPU " + std::to_string(device) + " (" + describe(r) + ")";
    return nullptr;
  }
  char name[256] = {}, bus[64] = {};
  f.device_get_name(name, sizeof(name), s->device_);
  s->api_->device_get_pci_bus_id(bus, sizeof(bus), s->device_);
  s->name_ = name;
  s->pci_ = bus;
  if ((r = f.primary_ctx_retain(&s->ctx_, s->device_)) != CUDA_SUCCESS ||
      (r = f.ctx_set_current(s->ctx_)) != CUDA_SUCCESS) {
    *error = "cannot use GPU " + std::to_string(device) + " (" + describe(r) + ")";
    s->ctx_ = nullptr;
    return nullptr;
  }
  if ((r = f.mem_alloc(&s->dev_, device_bytes)) != CUDA_SUCCESS) {
    *error = "cannot allocate " + std::to_string(device_bytes >> 20) + " MiB on GPU " +
             std::to_string(device) + " (" + describe(r) + ")";
    s->dev_ = 0;
    return nullptr;
  }
  s->dev_bytes_ = device_bytes;
  return s;
}

CudaSession::~CudaSession() {
  if (!fn_) return;
  for (void* p : pinned_)
    if (p) fn_->mem_free_host(p);
  if (dev_) fn_->mem_free(dev_);
  if (ctx_) fn_->primary_ctx_release(device_);
}

CUresult CudaSession::cuda_htod(CUdeviceptr dst, const void* host, std::size_t bytes) const {
  return fn_->memcpy_htod(dst, host, bytes);
}

CUresult CudaSession::cuda_dtoh(void* host, CUdeviceptr src, std::size_t bytes) const {
  return fn_->memcpy_dtoh(host, src, bytes);
}

CUresult CudaSession::synchronize() const {
  return fn_->ctx_synchronize();
}

void* CudaSession::alloc_pinned(std::size_t bytes) {
  for (void*& slot : pinned_) {
    if (slot) continue;
    void* p = nullptr;
    if (fn_->mem_alloc_host(&p, bytes) != CUDA_SUCCESS) return nullptr;
    slot = p;
    return p;
  }
  return nullptr;
}

}  // namespace cmt
