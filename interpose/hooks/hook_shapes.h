// The signatures of the hooked entry points, one per shape of hook_table.h (CMT_SHAPE_x:
// `result, (params), (args)`, as hooks/exported.h spreads them): the CUDA runtime's and the
// driver's copies and host memory. Shared by the engine's hooks (runtime_hooks.cpp,
// driver_hooks.cpp) and libcmt.so's forwarding exports (front.cpp), which must match them exactly.
#pragma once

#include <cuda.h>
#include <driver_types.h>

#include <cstddef>

#undef cuGetProcAddress  // cuda.h maps these to _v2; every variant is hooked, by real name
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync
#undef cuStreamSynchronize  // cuda.h maps it to _ptsz under per-thread default streams
#undef cuCtxDestroy         // and these to _v2, while cudart asks for the first variants too
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxRelease

// ---- the CUDA runtime's
#define CMT_SHAPE_RuntimeCopy                                                   \
  cudaError_t, (void* dst, const void* src, size_t count, cudaMemcpyKind kind), \
      (dst, src, count, kind)
#define CMT_SHAPE_RuntimeCopyAsync                                                          \
  cudaError_t,                                                                              \
      (void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream), \
      (dst, src, count, kind, stream)
#define CMT_SHAPE_RuntimePeer                                                        \
  cudaError_t, (void* dst, int dst_device, const void* src, int src_device, size_t count), \
      (dst, dst_device, src, src_device, count)
#define CMT_SHAPE_RuntimePeerAsync                                                   \
  cudaError_t,                                                                       \
      (void* dst, int dst_device, const void* src, int src_device, size_t count,     \
       cudaStream_t stream),                                                         \
      (dst, dst_device, src, src_device, count, stream)
#define CMT_SHAPE_RuntimeHostAlloc \
  cudaError_t, (void** p, size_t size, unsigned int flags), (p, size, flags)
#define CMT_SHAPE_RuntimeMallocHost cudaError_t, (void** p, size_t size), (p, size)
#define CMT_SHAPE_RuntimeHostRelease cudaError_t, (void* p), (p)
#define CMT_SHAPE_RuntimeHostRegister \
  cudaError_t, (void* p, size_t size, unsigned int flags), (p, size, flags)
#define CMT_SHAPE_RuntimeStreamSync cudaError_t, (cudaStream_t stream), (stream)
#define CMT_SHAPE_RuntimeDeviceSync cudaError_t, (void), ()
#define CMT_SHAPE_RuntimeEventSync cudaError_t, (cudaEvent_t event), (event)

// ---- the CUDA driver's
#define CMT_SHAPE_StreamSync CUresult, (CUstream s), (s)
#define CMT_SHAPE_CtxSync CUresult, (void), ()
#define CMT_SHAPE_CtxSyncV2 CUresult, (CUcontext ctx), (ctx)
#define CMT_SHAPE_EventSync CUresult, (CUevent e), (e)
#define CMT_SHAPE_CtxDestroy CUresult, (CUcontext ctx), (ctx)
#define CMT_SHAPE_PrimaryCtxReset CUresult, (CUdevice dev), (dev)
#define CMT_SHAPE_PrimaryCtxRelease CUresult, (CUdevice dev), (dev)
#define CMT_SHAPE_GreenCtxDestroy CUresult, (CUgreenCtx green), (green)
#define CMT_SHAPE_HostAlloc \
  CUresult, (void** p, size_t bytes, unsigned int flags), (p, bytes, flags)
#define CMT_SHAPE_AllocHost CUresult, (void** p, size_t bytes), (p, bytes)
#define CMT_SHAPE_HostRelease CUresult, (void* p), (p)
#define CMT_SHAPE_HostRegister \
  CUresult, (void* p, size_t bytes, unsigned int flags), (p, bytes, flags)
#define CMT_SHAPE_PointerAttribute                                          \
  CUresult, (void* data, CUpointer_attribute attribute, CUdeviceptr ptr), \
      (data, attribute, ptr)
#define CMT_SHAPE_PointerAttributes                                                      \
  CUresult, (unsigned int count, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr), \
      (count, attributes, data, ptr)
#define CMT_SHAPE_HostGetFlags CUresult, (unsigned int* flags, void* p), (flags, p)
#define CMT_SHAPE_HostGetDevicePointer \
  CUresult, (CUdeviceptr* device, void* p, unsigned int flags), (device, p, flags)
#define CMT_SHAPE_HtoD CUresult, (CUdeviceptr dst, const void* src, size_t n), (dst, src, n)
#define CMT_SHAPE_DtoH CUresult, (void* dst, CUdeviceptr src, size_t n), (dst, src, n)
#define CMT_SHAPE_HtoDAsync \
  CUresult, (CUdeviceptr dst, const void* src, size_t n, CUstream s), (dst, src, n, s)
#define CMT_SHAPE_DtoHAsync \
  CUresult, (void* dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)
#define CMT_SHAPE_Unified CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n)
#define CMT_SHAPE_UnifiedAsync \
  CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)
#define CMT_SHAPE_DtoD CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n)
#define CMT_SHAPE_DtoDAsync \
  CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)
#define CMT_SHAPE_Peer                                                                  \
  CUresult, (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n), \
      (dst, dst_ctx, src, src_ctx, n)
#define CMT_SHAPE_PeerAsync                                                          \
  CUresult,                                                                          \
      (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n, \
       CUstream s),                                                                  \
      (dst, dst_ctx, src, src_ctx, n, s)
#define CMT_SHAPE_Batch                                                                \
  CUresult,                                                                            \
      (CUdeviceptr * dsts, CUdeviceptr * srcs, size_t * sizes, size_t count,           \
       CUmemcpyAttributes * attrs, size_t * attrs_idxs, size_t num_attrs, CUstream s), \
      (dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, s)
#define CMT_SHAPE_BatchV1                                                                      \
  CUresult,                                                                                    \
      (CUdeviceptr * dsts, CUdeviceptr * srcs, size_t * sizes, size_t count,                   \
       CUmemcpyAttributes * attrs, size_t * attrs_idxs, size_t num_attrs, size_t * fail_index, \
       CUstream s),                                                                            \
      (dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_index, s)
#define CMT_SHAPE_GetProcAddress                                             \
  CUresult, (const char* symbol, void** pfn, int version, cuuint64_t flags), \
      (symbol, pfn, version, flags)
#define CMT_SHAPE_GetProcAddressV2                                    \
  CUresult,                                                           \
      (const char* symbol, void** pfn, int version, cuuint64_t flags, \
       CUdriverProcAddressQueryResult* status),                       \
      (symbol, pfn, version, flags, status)

// The copies cmt leaves to CUDA (CMT_DRIVER_STRUCTURED_HOOKS).
#define CMT_SHAPE_Copy2D CUresult, (const CUDA_MEMCPY2D* copy), (copy)
#define CMT_SHAPE_Copy2DAsync \
  CUresult, (const CUDA_MEMCPY2D* copy, CUstream s), (copy, s)
#define CMT_SHAPE_Copy3D CUresult, (const CUDA_MEMCPY3D* copy), (copy)
#define CMT_SHAPE_Copy3DAsync \
  CUresult, (const CUDA_MEMCPY3D* copy, CUstream s), (copy, s)
#define CMT_SHAPE_Copy3DPeer CUresult, (const CUDA_MEMCPY3D_PEER* copy), (copy)
#define CMT_SHAPE_Copy3DPeerAsync \
  CUresult, (const CUDA_MEMCPY3D_PEER* copy, CUstream s), (copy, s)
#define CMT_SHAPE_HtoA \
  CUresult, (CUarray dst, size_t offset, const void* src, size_t n), (dst, offset, src, n)
#define CMT_SHAPE_AtoH \
  CUresult, (void* dst, CUarray src, size_t offset, size_t n), (dst, src, offset, n)
#define CMT_SHAPE_HtoAAsync                                                             \
  CUresult, (CUarray dst, size_t offset, const void* src, size_t n, CUstream s), \
      (dst, offset, src, n, s)
#define CMT_SHAPE_AtoHAsync                                                        \
  CUresult, (void* dst, CUarray src, size_t offset, size_t n, CUstream s), \
      (dst, src, offset, n, s)
#define CMT_SHAPE_Batch3D                                                              \
  CUresult, (size_t count, CUDA_MEMCPY3D_BATCH_OP * ops, unsigned long long flags, \
             CUstream s),                                                          \
      (count, ops, flags, s)
#define CMT_SHAPE_Batch3DV1                                                            \
  CUresult,                                                                            \
      (size_t count, CUDA_MEMCPY3D_BATCH_OP * ops, size_t * fail_index,                \
       unsigned long long flags, CUstream s),                                          \
      (count, ops, fail_index, flags, s)
