#include "cuda_session.h"

namespace cmt {

std::unique_ptr<CudaSession> CudaSession::open(int device, std::size_t device_bytes,
                                               std::string* error) {
  std::unique_ptr<CudaSession> s(new CudaSession());
  s->api_ = real_driver();
  if (!s->api_) {
    *error = "no CUDA driver (libcuda.so.1) on this machine, or one that lacks a function cmt uses";
    return nullptr;
  }
  const DriverApi& f = *s->api_;
  CUresult r = f.init(0);
  if (r != CUDA_SUCCESS) {
    *error = "cuInit failed (" + cuda_error_text(f, r) + "): no usable NVIDIA GPU";
    return nullptr;
  }
  if ((r = f.device_get(&s->device_, device)) != CUDA_SUCCESS) {
    *error = "no GPU " + std::to_string(device) + " (" + cuda_error_text(f, r) + ")";
    return nullptr;
  }
  char name[256] = {}, bus[64] = {};
  f.device_get_name(name, sizeof(name), s->device_);
  f.device_get_pci_bus_id(bus, sizeof(bus), s->device_);
  s->name_ = name;
  s->pci_ = bus;
  if ((r = f.primary_ctx_retain(&s->ctx_, s->device_)) != CUDA_SUCCESS ||
      (r = f.ctx_set_current(s->ctx_)) != CUDA_SUCCESS) {
    *error = "cannot use GPU " + std::to_string(device) + " (" + cuda_error_text(f, r) + ")";
    s->ctx_ = nullptr;
    return nullptr;
  }
  if ((r = f.mem_alloc(&s->dev_, device_bytes)) != CUDA_SUCCESS) {
    *error = "cannot allocate " + std::to_string(device_bytes >> 20) + " MiB on GPU " +
             std::to_string(device) + " (" + cuda_error_text(f, r) + ")";
    s->dev_ = 0;
    return nullptr;
  }
  s->dev_bytes_ = device_bytes;
  return s;
}

CudaSession::~CudaSession() {
  if (!api_) return;
  for (void* p : pinned_)
    if (p) api_->mem_free_host(p);
  if (dev_) api_->mem_free(dev_);
  if (ctx_) api_->primary_ctx_release(device_);
}

CUresult CudaSession::cuda_htod(CUdeviceptr dst, const void* host, std::size_t bytes) const {
  return api_->memcpy_htod(dst, host, bytes);
}

CUresult CudaSession::cuda_dtoh(void* host, CUdeviceptr src, std::size_t bytes) const {
  return api_->memcpy_dtoh(host, src, bytes);
}

CUresult CudaSession::synchronize() const {
  return api_->ctx_synchronize();
}

void* CudaSession::alloc_pinned(std::size_t bytes) {
  for (void*& slot : pinned_) {
    if (slot) continue;
    void* p = nullptr;
    if (api_->mem_alloc_host(&p, bytes) != CUDA_SUCCESS) return nullptr;
    slot = p;
    return p;
  }
  return nullptr;
}

}  // namespace cmt
