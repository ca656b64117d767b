// Error checks for cmt's benchmark programs (never the library, which must not exit): a failed
// CUDA call prints the program, the call and the error, and ends the program.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <errno.h>

#include <cstdio>
#include <cstdlib>

// A CUDA runtime call (cudaError_t).
#define CMT_CHECK_CUDA(call)                                                            \
  do {                                                                                  \
    const cudaError_t cmt_e_ = (call);                                                  \
    if (cmt_e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s: %s failed: %s\n", program_invocation_short_name, #call, \
                   cudaGetErrorString(cmt_e_));                                         \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

// A CUDA driver call (CUresult), reached without linking libcuda: the number alone.
#define CMT_CHECK_CU(call)                                                                         \
  do {                                                                                             \
    const CUresult cmt_r_ = (call);                                                                \
    if (cmt_r_ != CUDA_SUCCESS) {                                                                  \
      std::fprintf(stderr, "%s: %s failed: CUDA error %d\n", program_invocation_short_name, #call, \
                   static_cast<int>(cmt_r_));                                                      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
