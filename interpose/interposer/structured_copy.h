// The host bytes a copy that cmt leaves to CUDA may touch: the 2D and 3D copies (cuMemcpy2D*,
// cuMemcpy3D*, cuMemcpy3DPeer*, which the runtime's cudaMemcpy2D/3D and its copies to and from
// arrays reach), and the 3D batches (cuMemcpy3DBatchAsync). cmt makes none of these copies. With
// hot buffers on, it must still see their host side: a page of cmt's registration there would
// make CUDA take the copy as one from pinned memory and return before its bytes had moved,
// where without cmt (pageable memory) the call returns with the source read or the destination
// written. So the hooks drop those registrations first (Interposer::hand_back_to_cuda).
//
// A span may be larger than the bytes the copy moves, never smaller: rows are counted at the
// larger of pitch and width, a slice at the larger of its height and the copy's, an element of a
// 3D batch whose other side is an array at 16 bytes (the widest array element: four 32-bit
// channels, or a compressed block), and a span that would pass the end of the address space ends there. A side in
// unified memory (CU_MEMORYTYPE_UNIFIED) may be a host pointer, so it counts as one.
#pragma once

#include <cuda.h>

#include <cstddef>

namespace cmt {

struct HostSpan {
  const void* p = nullptr;
  std::size_t bytes = 0;  // 0: no host side
};

// The source's and the destination's host spans ([0] and [1]); empty for a device or array side.
struct HostSpans {
  HostSpan side[2];
};

HostSpans host_spans(const CUDA_MEMCPY2D& copy);
HostSpans host_spans(const CUDA_MEMCPY3D& copy);
HostSpans host_spans(const CUDA_MEMCPY3D_PEER& copy);
HostSpans host_spans(const CUDA_MEMCPY3D_BATCH_OP& op);

}  // namespace cmt
