// What the tuner needs from CUDA to measure copies on one GPU: the driver (through libcmt's own
// driver table, opened with dlopen, so `cmt` itself runs on machines without one), the GPU's
// primary context made current, device memory, pinned host memory, and CUDA's own copy paths
// (pageable and pinned) for comparison. The copy engine runs over the same table.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cuda/driver_api.h"

namespace cmt {

class CudaSession {
 public:
  // Opens GPU `device`; nullptr with `*error` set if there is no driver, no such GPU, or no
  // memory. The calling thread is the one that may use the session.
  static std::unique_ptr<CudaSession> open(int device, std::size_t device_bytes,
                                           std::string* error);
  ~CudaSession();
  CudaSession(const CudaSession&) = delete;
  CudaSession& operator=(const CudaSession&) = delete;

  const DriverApi& driver() const { return *api_; }
  // The GPU's primary context: another thread makes it current before it copies.
  CUcontext context() const { return ctx_; }
  CUdeviceptr device_buffer() const { return dev_; }
  std::size_t device_bytes() const { return dev_bytes_; }
  const std::string& name() const { return name_; }
  const std::string& pci_bus_id() const { return pci_; }

  // CUDA's own synchronous copies (what a program gets without cmt): from or into `host`, which
  // may be pageable or pinned. Return CUDA_SUCCESS or the error.
  CUresult cuda_htod(CUdeviceptr dst, const void* host, std::size_t bytes) const;
  CUresult cuda_dtoh(void* host, CUdeviceptr src, std::size_t bytes) const;
  CUresult synchronize() const;

  // Pinned host memory (freed with the session); nullptr on failure.
  void* alloc_pinned(std::size_t bytes);

 private:
  CudaSession() = default;
  const DriverApi* api_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUdevice device_ = 0;
  CUdeviceptr dev_ = 0;
  std::size_t dev_bytes_ = 0;
  std::string name_, pci_;
  void* pinned_[8] = {};
};

}  // namespace cmt
