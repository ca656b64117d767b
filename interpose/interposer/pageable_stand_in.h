// CUDA's pointer queries about pages cmt registered (register = hot), answered as CUDA answers
// them about pageable memory. Without this, cuPointerGetAttribute(s), cudaPointerGetAttributes
// (and so torch's is_pinned()), cuMemHostGetFlags and cuMemHostGetDevicePointer would tell a
// program that a buffer it never registered is pinned, and it might act on that (skip its own
// pinning, rely on a registration cmt drops at the next free).
//
// How: CUDA is asked the same question about a stand-in, the same offset in a page of cmt's own
// that nothing registers, and every address in the answer that lies in that page is moved back to
// the program's page. CUDA's answer for pageable memory does not otherwise depend on the address
// (measured on the H200 with cmt-lab-pointer-attrs, bench/lab/NOTES.md 55: the memory type, the
// device ordinal -2 and the host pointer, the queried address itself), so the answer is the one
// the program would get without cmt, on every driver, with no table of answers to keep in step.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace cmt {

// The address CUDA is asked about instead of `p`: `p`'s offset in its page, in the stand-in page.
std::uintptr_t pageable_stand_in(std::uintptr_t p);

// An answer about `stand_in` (an attribute's value, or a device pointer) put back in terms of
// `p`: a pointer-sized value inside the stand-in's page becomes the same offset from `p`'s page.
// Values of attributes that hold no address are left alone.
void move_back_answer(CUpointer_attribute attribute, void* value, std::uintptr_t stand_in,
                      std::uintptr_t p);
void move_back_address(CUdeviceptr* value, std::uintptr_t stand_in, std::uintptr_t p);

}  // namespace cmt
