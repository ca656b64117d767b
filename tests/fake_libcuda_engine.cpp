// A stand-in libcuda.so.1 that carries cmt's whole engine on a CPU machine: the fake driver of the
// engine tests (fake_driver.h: host memory as device memory, one thread per stream running DMAs
// late and out of step) behind the real library's entry points. With libcmt.so preloaded, a
// program linked against it goes hook -> interposer -> engine -> this driver, as on a GPU, and
// faults can be injected at any driver call. fake_engine.sh drives it.
//
// CMT_FAKE_CUDA="key=value,..." sets the faults (fake_driver.h's Faults) and the streams' delay:
//   delay_us, dma_fail_at, dma_fail_code, query_fail_at, query_fail_from, query_fail_code,
//   record_fail_at, query_fail_record, host_register (a CUresult), event_create (a CUresult),
//   no_context (0/1), devices (GPUs, each with one context; none reaches another's memory),
//   check_releases (1: every system call that releases pages is checked against the registered
//   ranges: fake_release_check.cpp), unregister_wait_ms (how long cuMemHostUnregister takes, as
//   CUDA's waits for the GPU's queued work).
#include <cuda.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "fake_driver.h"

#undef cuGetProcAddress

#define CMT_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using cmt::fake::FakeDriver;

void set_fault(FakeDriver& d, const std::string& key, long v) {
  auto& f = d.faults;
  if (key == "dma_fail_at") f.dma_fail_at = v;
  else if (key == "dma_fail_code") f.dma_fail_code = static_cast<CUresult>(v);
  else if (key == "query_fail_at") f.query_fail_at = v;
  else if (key == "query_fail_from") f.query_fail_from = v;
  else if (key == "query_fail_code") f.query_fail_code = static_cast<CUresult>(v);
  else if (key == "record_fail_at") f.record_fail_at = v;
  else if (key == "query_fail_record") f.query_fail_record = v;
  else if (key == "host_register") f.host_register = static_cast<CUresult>(v);
  else if (key == "event_create") f.event_create = static_cast<CUresult>(v);
  else if (key == "no_context") f.no_context = v != 0;
  else if (key == "devices") d.devices = static_cast<int>(v);
  else if (key == "unregister_wait_ms") d.unregister_wait_ms.store(static_cast<int>(v));
  else if (key == "check_releases") {
    // A kernel or container without seccomp's user notification: said, and the run goes on
    // without the watch (hot_safety.sh then checks the bytes alone, and says so).
    if (v && !cmt::fake::install_release_check())
      std::fprintf(stderr, "fake cuda: release check unavailable (%s)\n", std::strerror(errno));
  }
  else {
    std::fprintf(stderr, "fake libcuda: unknown CMT_FAKE_CUDA key '%s'\n", key.c_str());
    std::abort();  // a test's typo must not pass as a clean run
  }
}

// Made on first use and never destroyed: its stream threads serve copies until the process ends.
FakeDriver& fake() {
  static FakeDriver* d = [] {
    std::string spec = std::getenv("CMT_FAKE_CUDA") ? std::getenv("CMT_FAKE_CUDA") : "";
    std::vector<std::pair<std::string, long>> items;
    int delay_us = 30;
    for (std::size_t at = 0; at < spec.size();) {
      std::size_t end = spec.find(',', at);
      if (end == std::string::npos) end = spec.size();
      std::string item = spec.substr(at, end - at);
      std::size_t eq = item.find('=');
      long v = eq == std::string::npos ? 0 : std::strtol(item.c_str() + eq + 1, nullptr, 0);
      if (item.compare(0, eq, "delay_us") == 0) delay_us = static_cast<int>(v);
      else items.emplace_back(item.substr(0, eq), v);
      at = end + 1;
    }
    auto* drv = new FakeDriver(delay_us);
    for (const auto& [key, value] : items) set_fault(*drv, key, value);
    return drv;
  }();
  return *d;
}

CUresult copy_on(CUstream stream, void* dst, const void* src, std::size_t n, bool sync) {
  fake().run_copy(stream, dst, src, n, sync);
  return CUDA_SUCCESS;
}

void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(p); }

}  // namespace

// ---- what programs call (and what cmt's hooks forward to) ----------------------------------------
CMT_FAKE_EXPORT CUresult cuInit(unsigned) {
  fake();
  return CUDA_SUCCESS;
}
CMT_FAKE_EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  return fake().api().device_get(d, ordinal);
}
CMT_FAKE_EXPORT CUresult cuDeviceGetCount(int* count) {
  return fake().api().device_get_count(count);
}
CMT_FAKE_EXPORT CUresult cuMemHostRegister(void* p, size_t n, unsigned flags) {
  return fake().api().mem_host_register(p, n, flags);
}
CMT_FAKE_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice) {
  std::snprintf(name, static_cast<std::size_t>(len), "cmt fake GPU");
  return CUDA_SUCCESS;
}
CMT_FAKE_EXPORT CUresult cuGetErrorName(CUresult r, const char** name) {
  *name = r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CMT_FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  return fake().api().primary_ctx_retain(c, d);
}
CMT_FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice d) {
  return fake().api().primary_ctx_release(d);
}
// Ending a context waits for its work, as CUDA's end does; its handle is then the new primary
// context's, and the handles made in the old one are dead (a call on one is counted).
CMT_FAKE_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) {
  fake().synchronize_all();
  fake().end_context(cmt::fake::fake_context(d));
  return CUDA_SUCCESS;
}
// Not a CUDA call: the same end as a reset's, made where no hook of cmt's can see it (as a variant
// cmt does not hook would), for the check that cmt finds it at its next copy in the new context.
CMT_FAKE_EXPORT void fake_cuda_end_context_unseen(CUdevice d) {
  fake().synchronize_all();
  fake().end_context(cmt::fake::fake_context(d));
}
// Green contexts, as far as cmt meets them: the fake's green context of a GPU stands on that
// GPU's one context (cuCtxFromGreenCtx gives it), and its destroy ends that context as a reset
// does, so that cmt's letting go before it can be checked.
CMT_FAKE_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx* green, CUdevResourceDesc, CUdevice d,
                                          unsigned) {
  if (d < 0 || d >= fake().devices) return CUDA_ERROR_INVALID_DEVICE;
  *green = reinterpret_cast<CUgreenCtx>(cmt::fake::fake_context(d));
  return CUDA_SUCCESS;
}
CMT_FAKE_EXPORT CUresult cuCtxFromGreenCtx(CUcontext* ctx, CUgreenCtx green) {
  *ctx = reinterpret_cast<CUcontext>(green);
  return CUDA_SUCCESS;
}
CMT_FAKE_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx green) {
  fake().synchronize_all();
  fake().end_context(reinterpret_cast<CUcontext>(green));
  return CUDA_SUCCESS;
}
CMT_FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext c) { return fake().api().ctx_set_current(c); }
CMT_FAKE_EXPORT CUresult cuCtxSynchronize() {
  fake().synchronize_all();
  return CUDA_SUCCESS;
}
CMT_FAKE_EXPORT CUresult cuMemAlloc(CUdeviceptr* p, size_t n) {
  CUdevice d = 0;
  if (fake().api().ctx_get_device(&d) != CUDA_SUCCESS) d = 0;
  *p = fake().alloc_device(n, d);  // on the current context's GPU
  return CUDA_SUCCESS;
}
CMT_FAKE_EXPORT CUresult cuMemFree(CUdeviceptr) { return CUDA_SUCCESS; }  // kept until exit
CMT_FAKE_EXPORT CUresult cuMemAllocHost(void** p, size_t n) {
  *p = fake().alloc_pinned(n);
  return CUDA_SUCCESS;
}
CMT_FAKE_EXPORT CUresult cuMemHostAlloc(void** p, size_t n, unsigned) { return cuMemAllocHost(p, n); }
CMT_FAKE_EXPORT CUresult cuMemFreeHost(void*) { return CUDA_SUCCESS; }
CMT_FAKE_EXPORT CUresult cuStreamCreate(CUstream* s, unsigned flags) {
  return fake().api().stream_create(s, flags);
}
CMT_FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s) { return fake().api().stream_synchronize(s); }

// The copies, as CUDA's: a synchronous one returns once its stream has run it; an asynchronous
// one is queued on its stream.
CMT_FAKE_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  return copy_on(CU_STREAM_LEGACY, ptr(dst), src, n, true);
}
CMT_FAKE_EXPORT CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  return copy_on(CU_STREAM_LEGACY, dst, ptr(src), n, true);
}
CMT_FAKE_EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return copy_on(s, ptr(dst), src, n, false);
}
CMT_FAKE_EXPORT CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_on(s, dst, ptr(src), n, false);
}
CMT_FAKE_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  return copy_on(CU_STREAM_PER_THREAD, ptr(dst), src, n, true);
}
CMT_FAKE_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  return copy_on(CU_STREAM_PER_THREAD, dst, ptr(src), n, true);
}

// Device to device, within a GPU or between two (the driver would stage the latter through the
// host): as the copies above, on the current context's stream.
CMT_FAKE_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy_on(CU_STREAM_LEGACY, ptr(dst), ptr(src), n, true);
}
CMT_FAKE_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                              CUstream s) {
  return copy_on(s, ptr(dst), ptr(src), n, false);
}
CMT_FAKE_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy_on(CU_STREAM_LEGACY, ptr(dst), ptr(src), n, true);
}
CMT_FAKE_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_on(s, ptr(dst), ptr(src), n, false);
}
CMT_FAKE_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext,
                                      size_t n) {
  return copy_on(CU_STREAM_LEGACY, ptr(dst), ptr(src), n, true);
}
CMT_FAKE_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext,
                                           size_t n, CUstream s) {
  return copy_on(s, ptr(dst), ptr(src), n, false);
}

// 2D and 3D copies between host and device memory (no arrays), as CUDA makes them: with the host
// side pinned (allocated or registered), queued on the stream like any asynchronous copy; with it
// pageable, the call returns once the rows have moved (CUDA stages them), asynchronous or not.
namespace {
struct Box {
  char* src;
  char* dst;
  std::size_t src_pitch, dst_pitch, src_rows, dst_rows;  // rows: a slice's height in rows
  std::size_t width, height, depth;
};
CUresult copy_box(const Box& b, CUstream s, bool async, const void* host, std::size_t host_bytes) {
  const bool sync = !async || !host || !fake().pinned(host, host_bytes);
  for (std::size_t z = 0; z < b.depth; ++z)
    for (std::size_t y = 0; y < b.height; ++y)
      copy_on(s, b.dst + (z * b.dst_rows + y) * b.dst_pitch,
              b.src + (z * b.src_rows + y) * b.src_pitch, b.width, false);
  if (sync) fake().api().stream_synchronize(s ? s : CU_STREAM_LEGACY);
  return CUDA_SUCCESS;
}
char* side_base(CUmemorytype type, const void* host, CUdeviceptr device) {
  return static_cast<char*>(type == CU_MEMORYTYPE_HOST ? const_cast<void*>(host) : ptr(device));
}
template <typename Copy>
CUresult copy_3d(const Copy& c, std::size_t src_rows, std::size_t dst_rows, std::size_t depth,
                 std::size_t src_z, std::size_t dst_z, CUstream s, bool async) {
  if (c.srcMemoryType == CU_MEMORYTYPE_ARRAY || c.dstMemoryType == CU_MEMORYTYPE_ARRAY)
    return CUDA_ERROR_NOT_SUPPORTED;
  src_rows = src_rows ? src_rows : c.Height;
  dst_rows = dst_rows ? dst_rows : c.Height;
  char* src = side_base(c.srcMemoryType, c.srcHost, c.srcDevice) +
              (src_z * src_rows + c.srcY) * c.srcPitch + c.srcXInBytes;
  char* dst = side_base(c.dstMemoryType, c.dstHost, c.dstDevice) +
              (dst_z * dst_rows + c.dstY) * c.dstPitch + c.dstXInBytes;
  const Box box{src, dst, c.srcPitch, c.dstPitch, src_rows, dst_rows, c.WidthInBytes, c.Height,
                depth};
  const bool from_host = c.srcMemoryType == CU_MEMORYTYPE_HOST;
  const char* host = from_host ? src : c.dstMemoryType == CU_MEMORYTYPE_HOST ? dst : nullptr;
  const std::size_t pitch = from_host ? c.srcPitch : c.dstPitch;
  const std::size_t rows = from_host ? src_rows : dst_rows;
  return copy_box(box, s, async, host, ((depth - 1) * rows + c.Height - 1) * pitch + c.WidthInBytes);
}
}  // namespace

CMT_FAKE_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* c) {
  return copy_3d(*c, 0, 0, 1, 0, 0, CU_STREAM_LEGACY, false);
}
CMT_FAKE_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream s) {
  return copy_3d(*c, 0, 0, 1, 0, 0, s, true);
}
CMT_FAKE_EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* c) {
  return copy_3d(*c, c->srcHeight, c->dstHeight, c->Depth, c->srcZ, c->dstZ, CU_STREAM_LEGACY,
                 false);
}
CMT_FAKE_EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* c, CUstream s) {
  return copy_3d(*c, c->srcHeight, c->dstHeight, c->Depth, c->srcZ, c->dstZ, s, true);
}

// Batches, CUDA 13's form and CUDA 12.8's (failIdx): refused as CUDA refuses them (no copies, a
// missing array, attributes out of order, the legacy stream), else each copy queued on the stream.
// One rule of the fake's own, so a test can make one copy fail: a copy of no bytes fails the
// batch, and failIdx names it.
namespace {
CUresult batch_on(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                  CUmemcpyAttributes* attrs, size_t* idxs, size_t num_attrs, CUstream s,
                  size_t* fail_idx) {
  if (fail_idx) *fail_idx = SIZE_MAX;
  if (count == 0 || !dsts || !srcs || !sizes || !attrs || !idxs || num_attrs == 0 ||
      num_attrs > count || idxs[0] != 0 || !s || s == CU_STREAM_LEGACY)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t k = 1; k < num_attrs; ++k)
    if (idxs[k] <= idxs[k - 1] || idxs[k] >= count) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i)
    if (sizes[i] == 0) {
      if (fail_idx) *fail_idx = i;
      return CUDA_ERROR_INVALID_VALUE;
    }
  for (size_t i = 0; i < count; ++i) copy_on(s, ptr(dsts[i]), ptr(srcs[i]), sizes[i], false);
  return CUDA_SUCCESS;
}
}  // namespace

CMT_FAKE_EXPORT CUresult cuMemcpyBatchAsync_v2(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes,
                                               size_t count, CUmemcpyAttributes* attrs,
                                               size_t* idxs, size_t num_attrs, CUstream s) {
  return batch_on(dsts, srcs, sizes, count, attrs, idxs, num_attrs, s, nullptr);
}
#undef cuMemcpyBatchAsync
CMT_FAKE_EXPORT CUresult cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes,
                                            size_t count, CUmemcpyAttributes* attrs, size_t* idxs,
                                            size_t num_attrs, size_t* fail_idx, CUstream s) {
  return batch_on(dsts, srcs, sizes, count, attrs, idxs, num_attrs, s, fail_idx);
}

// ---- questions about a pointer ------------------------------------------------------------------
CMT_FAKE_EXPORT CUresult cuPointerGetAttributes(unsigned n, CUpointer_attribute* attrs, void** data,
                                                CUdeviceptr p) {
  return fake().api().pointer_get_attributes(n, attrs, data, p);
}
// As CUDA: every attribute of an address it does not know (pageable memory) is an invalid value.
CMT_FAKE_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  unsigned type = 0;
  CUpointer_attribute type_attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
  void* type_data = &type;
  const CUresult r = cuPointerGetAttributes(1, &type_attr, &type_data, p);
  if (r != CUDA_SUCCESS) return r;
  if (type == 0) return CUDA_ERROR_INVALID_VALUE;
  return cuPointerGetAttributes(1, &attr, &data, p);
}

// ---- cuGetProcAddress: how cmt (and a static cudart) find the driver's functions -----------------
CMT_FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t,
                                             CUdriverProcAddressQueryResult* status) {
  cmt::DriverApi api = fake().api();
  // The entries the engine tests' table leaves out, from this library's exports.
  api.error_name = cuGetErrorName;
  api.init = cuInit;
  api.device_get_name = cuDeviceGetName;
  api.ctx_synchronize = cuCtxSynchronize;
  api.mem_alloc = cuMemAlloc;
  api.mem_free = cuMemFree;
  api.mem_alloc_host = cuMemAllocHost;
  api.mem_free_host = cuMemFreeHost;
  api.memcpy_htod = cuMemcpyHtoD;
  api.memcpy_dtoh = cuMemcpyDtoH;
  void* fn = nullptr;
#define CMT_FAKE_LOOKUP(name, member, ...) \
  if (std::strcmp(symbol, #name) == 0) fn = reinterpret_cast<void*>(api.member);
  CMT_DRIVER_FUNCTIONS(CMT_FAKE_LOOKUP)
  CMT_DRIVER_OPTIONAL_FUNCTIONS(CMT_FAKE_LOOKUP)
#undef CMT_FAKE_LOOKUP
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) fn = reinterpret_cast<void*>(&cuGetProcAddress_v2);
  *pfn = fn;
  if (status) *status = fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

// For the test program: the engine's DMAs run, and the calls made to the functions faults are
// injected at (so a test can tell that its fault was reached).
CMT_FAKE_EXPORT void fake_cuda_counts(long* dmas, long* enqueues, long* queries, long* records,
                                      long* registers) {
  *dmas = fake().dmas_run.load();
  *enqueues = fake().dma_count.load();
  *queries = fake().query_count.load();
  *records = fake().record_count.load();
  *registers = fake().register_count.load();
}
// Calls that passed a handle of a context that had ended (FakeDriver::end_context).
CMT_FAKE_EXPORT long fake_cuda_dead_handle_calls() {
  return fake().dead_handle_calls.load();
}
