/* The one table of entry points libcmt.so exports (and libcmt-engine.so, behind it). Adding an entry point of a shape that exists is
   one row here: the hooks' enum, names, real-function slots, exported wrappers, the "is this
   hooked" queries and the linker's version script (libcmt.map, made from this file by the C
   preprocessor at build time) all follow from it. A new shape also needs its signature
   (CMT_SHAPE_*, in the family's hooks file) and its handler.

   Plain preprocessor only: the version script is generated from this header.

   X(name, shape, per_thread_default): per_thread_default is 1 for the _ptds/_ptsz variants, whose
   NULL stream is the calling thread's default stream rather than the legacy one. */
#pragma once

/* The CUDA runtime's copies (hooks/runtime_hooks.cpp). Reached by programs that link libcudart
   dynamically; found past libcmt.so with RTLD_NEXT, or in the libcudart.so the process loaded. */
#define CMT_RUNTIME_HOOKS(X)                   \
  X(cudaMemcpy, RuntimeCopy, 0)                \
  X(cudaMemcpy_ptds, RuntimeCopy, 1)           \
  X(cudaMemcpyAsync, RuntimeCopyAsync, 0)      \
  X(cudaMemcpyAsync_ptsz, RuntimeCopyAsync, 1) \
  X(cudaMemcpyPeer, RuntimePeer, 0)            \
  X(cudaMemcpyPeerAsync, RuntimePeerAsync, 0)  \
  CMT_RUNTIME_HOST_MEMORY_HOOKS(X)             \
  CMT_RUNTIME_WAIT_HOOKS(X)

/* The runtime's CUDA host memory: recorded when handed out or registered, forgotten when freed,
   so the memcpy hook knows a library's own pinned buffers (interposer/host_memory.h). */
#define CMT_RUNTIME_HOST_MEMORY_HOOKS(X)     \
  X(cudaHostAlloc, RuntimeHostAlloc, 0)      \
  X(cudaMallocHost, RuntimeMallocHost, 0)    \
  X(cudaFreeHost, RuntimeHostRelease, 0)     \
  X(cudaHostRegister, RuntimeHostRegister, 0) \
  X(cudaHostUnregister, RuntimeHostRelease, 0)

/* The runtime's waits for the GPU: forwarded untouched, and kept in a recorded trace
   (interposer/recorder.h, RecordedWait), where a thread's time between copies is otherwise its
   work and its waits alike. */
#define CMT_RUNTIME_WAIT_HOOKS(X)                     \
  X(cudaStreamSynchronize, RuntimeStreamSync, 0)      \
  X(cudaStreamSynchronize_ptsz, RuntimeStreamSync, 1) \
  X(cudaDeviceSynchronize, RuntimeDeviceSync, 0)      \
  X(cudaEventSynchronize, RuntimeEventSync, 0)

/* The CUDA driver's copies and its symbol lookup (hooks/driver_hooks.cpp), by exact variant: the
   64-bit _v2 entries, never the legacy 32-bit ones such as cuMemcpyHtoD. Reached directly by
   programs that link libcuda, and through dlsym and cuGetProcAddress by those that open it (a
   static cudart, XLA): those answer these names with cmt's hook of the same variant. The batch
   copies: cuMemcpyBatchAsync is CUDA 12.8's form (with failIdx), _v2 CUDA 13's;
   cudaMemcpyBatchAsync reaches them through cudart's driver table. */
#define CMT_DRIVER_HOOKS(X)                   \
  X(cuMemcpyHtoD_v2, HtoD, 0)                 \
  X(cuMemcpyHtoD_v2_ptds, HtoD, 1)            \
  X(cuMemcpyDtoH_v2, DtoH, 0)                 \
  X(cuMemcpyDtoH_v2_ptds, DtoH, 1)            \
  X(cuMemcpyHtoDAsync_v2, HtoDAsync, 0)       \
  X(cuMemcpyHtoDAsync_v2_ptsz, HtoDAsync, 1)  \
  X(cuMemcpyDtoHAsync_v2, DtoHAsync, 0)       \
  X(cuMemcpyDtoHAsync_v2_ptsz, DtoHAsync, 1)  \
  X(cuMemcpy, Unified, 0)                     \
  X(cuMemcpy_ptds, Unified, 1)                \
  X(cuMemcpyAsync, UnifiedAsync, 0)           \
  X(cuMemcpyAsync_ptsz, UnifiedAsync, 1)      \
  X(cuMemcpyDtoD_v2, DtoD, 0)                 \
  X(cuMemcpyDtoD_v2_ptds, DtoD, 1)            \
  X(cuMemcpyDtoDAsync_v2, DtoDAsync, 0)       \
  X(cuMemcpyDtoDAsync_v2_ptsz, DtoDAsync, 1)  \
  X(cuMemcpyPeer, Peer, 0)                    \
  X(cuMemcpyPeer_ptds, Peer, 1)               \
  X(cuMemcpyPeerAsync, PeerAsync, 0)          \
  X(cuMemcpyPeerAsync_ptsz, PeerAsync, 1)     \
  X(cuMemcpyBatchAsync, BatchV1, 0)           \
  X(cuMemcpyBatchAsync_ptsz, BatchV1, 1)      \
  X(cuMemcpyBatchAsync_v2, Batch, 0)          \
  X(cuMemcpyBatchAsync_v2_ptsz, Batch, 1)     \
  X(cuGetProcAddress, GetProcAddress, 0)      \
  X(cuGetProcAddress_v2, GetProcAddressV2, 0) \
  CMT_DRIVER_STRUCTURED_HOOKS(X)              \
  CMT_DRIVER_HOST_MEMORY_HOOKS(X)             \
  CMT_DRIVER_POINTER_QUERY_HOOKS(X)           \
  CMT_DRIVER_WAIT_HOOKS(X)                    \
  CMT_DRIVER_CONTEXT_END_HOOKS(X)

/* The calls that end a context: cmt lets go of what it made in it (staging rings, registrations,
   records of its pinned memory) before the driver destroys it, or right after a release that
   did, so that nothing of it is used again, not even through a handle the driver gives to a new
   object (interposer/interposer.h, context_ends). cudaDeviceReset reaches the primary context's
   reset through cudart's driver table, and CUDA 13's cudart asks for the first variant of the
   primary context's reset and release (without _v2; an H100, lab/NOTES.md 103), so both variants
   are hooked, with the same signature and handler. A green context (CUDA 12.4) is known to cmt
   by the CUcontext cuCtxFromGreenCtx gives for it, and ends with cuGreenCtxDestroy (which CUDA
   13's cudaExecutionCtxDestroy reaches for one). */
#define CMT_DRIVER_CONTEXT_END_HOOKS(X)                 \
  X(cuCtxDestroy_v2, CtxDestroy, 0)                     \
  X(cuCtxDestroy, CtxDestroy, 0)                        \
  X(cuDevicePrimaryCtxReset_v2, PrimaryCtxReset, 0)     \
  X(cuDevicePrimaryCtxReset, PrimaryCtxReset, 0)        \
  X(cuDevicePrimaryCtxRelease_v2, PrimaryCtxRelease, 0) \
  X(cuDevicePrimaryCtxRelease, PrimaryCtxRelease, 0)    \
  X(cuGreenCtxDestroy, GreenCtxDestroy, 0)

/* The driver's waits for the GPU, as the runtime's (CMT_RUNTIME_WAIT_HOOKS); a runtime wait that
   reaches one through cudart's driver table is kept once, by the runtime's hook. */
#define CMT_DRIVER_WAIT_HOOKS(X)             \
  X(cuStreamSynchronize, StreamSync, 0)      \
  X(cuStreamSynchronize_ptsz, StreamSync, 1) \
  X(cuCtxSynchronize, CtxSync, 0)            \
  X(cuCtxSynchronize_v2, CtxSyncV2, 0)       \
  X(cuEventSynchronize, EventSync, 0)

/* The driver's copies that cmt leaves to CUDA: 2D, 3D, to and from arrays, 3D batches (the
   runtime's cudaMemcpy2D/3D and array copies reach them through cudart's driver table). Hooked
   only to hand CUDA their host pages as pageable memory (interposer/structured_copy.h). */
#define CMT_DRIVER_STRUCTURED_HOOKS(X)                  \
  X(cuMemcpy2D_v2, Copy2D, 0)                           \
  X(cuMemcpy2D_v2_ptds, Copy2D, 1)                      \
  X(cuMemcpy2DUnaligned_v2, Copy2D, 0)                  \
  X(cuMemcpy2DUnaligned_v2_ptds, Copy2D, 1)             \
  X(cuMemcpy2DAsync_v2, Copy2DAsync, 0)                 \
  X(cuMemcpy2DAsync_v2_ptsz, Copy2DAsync, 1)            \
  X(cuMemcpy3D_v2, Copy3D, 0)                           \
  X(cuMemcpy3D_v2_ptds, Copy3D, 1)                      \
  X(cuMemcpy3DAsync_v2, Copy3DAsync, 0)                 \
  X(cuMemcpy3DAsync_v2_ptsz, Copy3DAsync, 1)            \
  X(cuMemcpy3DPeer, Copy3DPeer, 0)                      \
  X(cuMemcpy3DPeer_ptds, Copy3DPeer, 1)                 \
  X(cuMemcpy3DPeerAsync, Copy3DPeerAsync, 0)            \
  X(cuMemcpy3DPeerAsync_ptsz, Copy3DPeerAsync, 1)       \
  X(cuMemcpyHtoA_v2, HtoA, 0)                           \
  X(cuMemcpyHtoA_v2_ptds, HtoA, 1)                      \
  X(cuMemcpyAtoH_v2, AtoH, 0)                           \
  X(cuMemcpyAtoH_v2_ptds, AtoH, 1)                      \
  X(cuMemcpyHtoAAsync_v2, HtoAAsync, 0)                 \
  X(cuMemcpyHtoAAsync_v2_ptsz, HtoAAsync, 1)            \
  X(cuMemcpyAtoHAsync_v2, AtoHAsync, 0)                 \
  X(cuMemcpyAtoHAsync_v2_ptsz, AtoHAsync, 1)            \
  X(cuMemcpy3DBatchAsync, Batch3DV1, 0)                 \
  X(cuMemcpy3DBatchAsync_ptsz, Batch3DV1, 1)            \
  X(cuMemcpy3DBatchAsync_v2, Batch3D, 0)                \
  X(cuMemcpy3DBatchAsync_v2_ptsz, Batch3D, 1)

/* The driver's CUDA host memory, as the runtime's above (a static cudart reaches these). */
#define CMT_DRIVER_HOST_MEMORY_HOOKS(X)        \
  X(cuMemHostAlloc, HostAlloc, 0)              \
  X(cuMemAllocHost_v2, AllocHost, 0)           \
  X(cuMemFreeHost, HostRelease, 0)             \
  X(cuMemHostRegister_v2, HostRegister, 0)     \
  X(cuMemHostUnregister, HostRelease, 0)

/* The driver's questions about a host pointer (the runtime's cudaPointerGetAttributes,
   cudaHostGetFlags and cudaHostGetDevicePointer reach them through cudart's driver table). Hooked
   only so that a page cmt registered answers as pageable memory (interposer/pageable_stand_in.h). */
#define CMT_DRIVER_POINTER_QUERY_HOOKS(X)                   \
  X(cuPointerGetAttribute, PointerAttribute, 0)             \
  X(cuPointerGetAttributes, PointerAttributes, 0)           \
  X(cuMemHostGetFlags, HostGetFlags, 0)                     \
  X(cuMemHostGetDevicePointer_v2, HostGetDevicePointer, 0)

/* Exported by libcmt.so beside the hooks, written by hand: the C library's dlsym
   (hooks/dlsym_hook.cpp, x86-64 assembly around a decision the engine makes) and cmt's own
   function (forwarded to the engine's). X(name) */
#define CMT_FRONT_EXPORTS(X) \
  X(dlsym)                   \
  X(cmt_forward_this_thread)

/* Exported by libcmt-engine.so beside the hooks, for libcmt.so's lookups alone (it is opened
   RTLD_LOCAL: hooks/engine_link.h): the attach and cmt's own function
   (hooks/runtime_hooks.cpp). X(name) */
#define CMT_ENGINE_EXPORTS(X)  \
  X(cmt_engine_attach)         \
  X(cmt_forward_this_thread)

/* libcmt-host.so, the second, small preload (hooks/libc_hooks.cpp, its version script
   libcmt-host.map): the C library's copies and fills, for the host leg, and sigaction with its
   relatives (hooks/signal_hooks.cpp), which keep cmt's signal handler in front
   (interposer/signal_chain.h); reads of files (read, pread and their fortified forms, readv, preadv,
   preadv2 and their 64-bit names, fread, fread_unlocked and their fortified forms), which the
   host leg reads on its threads where they fill CUDA host memory; and the entry that takes the
   engine's host-leg table
   (hooks/host_leg_abi.h). A library of its own because even a
   hook that only compares a size costs a tight loop of 64-byte memcpy calls measurably, so it is
   loaded only where host copies are on (`cmt run` adds it unless host_copy is off). X(name) */
#define CMT_HOST_LIBRARY_EXPORTS(X) \
  X(memcpy)                         \
  X(memmove)                        \
  X(__memcpy_chk)                   \
  X(__memmove_chk)                  \
  X(memset)                         \
  X(__memset_chk)                   \
  X(read)                           \
  X(__read_chk)                     \
  X(pread)                          \
  X(pread64)                        \
  X(__pread_chk)                    \
  X(__pread64_chk)                  \
  X(readv)                          \
  X(preadv)                         \
  X(preadv64)                       \
  X(preadv2)                        \
  X(preadv64v2)                     \
  X(fread)                          \
  X(fread_unlocked)                 \
  X(__fread_chk)                    \
  X(__fread_unlocked_chk)           \
  X(sigaction)                      \
  X(__sigaction)                    \
  X(signal)                         \
  X(bsd_signal)                     \
  X(ssignal)                        \
  X(sysv_signal)                    \
  X(__sysv_signal)                  \
  X(cmt_host_library_attach)

/* libcmt-release.so, preloaded only where register = hot (hooks/release_hooks.cpp, its version
   script libcmt-release.map): every call that gives pages back or replaces them, which drop cmt's
   registrations of hot buffers on those pages first (interposer/register_cache.h), and the entry
   that takes the cache's table (common/release_abi.h). X(name) */
#define CMT_RELEASE_LIBRARY_EXPORTS(X) \
  X(free)                              \
  X(realloc)                           \
  X(reallocarray)                      \
  X(munmap)                            \
  X(mremap)                            \
  X(madvise)                           \
  X(mmap)                              \
  X(mmap64)                            \
  X(brk)                               \
  X(sbrk)                              \
  X(shmdt)                             \
  X(syscall)                           \
  X(cmt_release_library_attach)
