// cmt-lab-pointer-attrs (lab, GPU): what CUDA says of a host pointer, so that cmt could answer for
// a buffer it registered as hot exactly as CUDA answers for pageable memory (issue 33: hot is not
// the default while cudaPointerGetAttributes, and so torch's is_pinned(), says pinned for it).
// For a pageable buffer, one the program registered, one from cudaMallocHost, and a pageable one
// copied three times first (under `cmt run` with CMT_REGISTER=hot: one cmt registered), prints
// every cuPointerGetAttribute answer (result code and value), cuPointerGetAttributes' for all
// attributes at once, and cudaPointerGetAttributes'. A value equal to the buffer's own address
// prints as "ptr", one inside it as "ptr+N". Ends with whether the buffer cmt registered was
// answered for exactly as the pageable one (cmt's pointer-query hooks, pageable_stand_in.h).
//
// usage: cmt-lab-pointer-attrs
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_check.h"

namespace {

constexpr std::size_t kBytes = 1u << 20;
// Every attribute but the P2P tokens (a struct of its own), by number.
constexpr int kAttributes[] = {1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};

std::string shown(std::uint64_t v, const void* base) {
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  if (v == b) return "ptr";
  if (v > b && v < b + kBytes) return "ptr+" + std::to_string(v - b);
  char out[32];
  std::snprintf(out, sizeof out, "%#llx", static_cast<unsigned long long>(v));
  return out;
}

// Prints CUDA's answers about the buffer and returns them, addresses relative to the buffer.
std::string probe(const char* name, void* p) {
  std::string answers;
  // The middle of the buffer, as a tensor view would be.
  void* at = static_cast<char*>(p) + 4096 + 16;
  const auto dp = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(at));
  std::printf("== %s\n  cuPointerGetAttribute:", name);
  for (int a : kAttributes) {
    std::uint64_t v[2] = {0, 0};
    const CUresult r = cuPointerGetAttribute(v, static_cast<CUpointer_attribute>(a), dp);
    const std::string one = " " + std::to_string(a) + ":" + std::to_string(static_cast<int>(r)) +
                            "/" + shown(v[0], p);
    std::printf("%s", one.c_str());
    answers += one;
  }
  std::vector<CUpointer_attribute> attrs;
  std::vector<std::uint64_t> values(2 * (sizeof kAttributes / sizeof kAttributes[0]), 0);
  std::vector<void*> data;
  for (std::size_t i = 0; i < sizeof kAttributes / sizeof kAttributes[0]; ++i) {
    attrs.push_back(static_cast<CUpointer_attribute>(kAttributes[i]));
    data.push_back(&values[2 * i]);
  }
  const CUresult all = cuPointerGetAttributes(static_cast<unsigned>(attrs.size()), attrs.data(),
                                              data.data(), dp);
  std::printf("\n  cuPointerGetAttributes: %d ->", static_cast<int>(all));
  answers += " | " + std::to_string(static_cast<int>(all));
  for (std::size_t i = 0; i < attrs.size(); ++i) {
    std::printf(" %d:%s", kAttributes[i], shown(values[2 * i], p).c_str());
    answers += " " + shown(values[2 * i], p);
  }
  cudaPointerAttributes rt{};
  const cudaError_t e = cudaPointerGetAttributes(&rt, at);
  std::printf("\n  cudaPointerGetAttributes: %d -> type %d device %d devicePointer %s hostPointer %s\n",
              static_cast<int>(e), static_cast<int>(rt.type), rt.device,
              shown(reinterpret_cast<std::uintptr_t>(rt.devicePointer), p).c_str(),
              shown(reinterpret_cast<std::uintptr_t>(rt.hostPointer), p).c_str());
  cudaGetLastError();
  answers += " | " + std::to_string(static_cast<int>(e)) + " " + std::to_string(rt.type) + " " +
             std::to_string(rt.device) + " " +
             shown(reinterpret_cast<std::uintptr_t>(rt.devicePointer), p) + " " +
             shown(reinterpret_cast<std::uintptr_t>(rt.hostPointer), p);
  return answers;
}

}  // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "cmt-lab-pointer-attrs: no CUDA GPU found\n");
    return 1;
  }
  CMT_CHECK_CUDA(cudaSetDevice(0));
  void* pageable = std::malloc(kBytes);
  void* registered = std::malloc(kBytes);
  void* copied = std::malloc(kBytes);
  void* pinned = nullptr;
  void* device = nullptr;
  if (!pageable || !registered || !copied) return 1;
  std::memset(pageable, 1, kBytes);
  std::memset(registered, 1, kBytes);
  std::memset(copied, 1, kBytes);
  CMT_CHECK_CUDA(cudaMallocHost(&pinned, kBytes));
  CMT_CHECK_CUDA(cudaMalloc(&device, kBytes));
  CMT_CHECK_CU(cuMemHostRegister(registered, kBytes, CU_MEMHOSTREGISTER_PORTABLE));
  for (int i = 0; i < 3; ++i)  // under cmt with register = hot, registered at the second copy
    CMT_CHECK_CUDA(cudaMemcpy(device, copied, kBytes, cudaMemcpyHostToDevice));
  const std::string plain = probe("pageable (malloc)", pageable);
  const std::string own = probe("registered by the program (cuMemHostRegister)", registered);
  probe("cudaMallocHost", pinned);
  const std::string hot = probe("pageable, copied 3 times (registered by cmt under CMT_REGISTER=hot)", copied);
  std::printf("the copied buffer answered for as the pageable one: %s; the program's registration "
              "answered for as pageable: %s\n", hot == plain ? "yes" : "NO",
              own == plain ? "yes (wrong)" : "no");
  return hot == plain && own != plain ? 0 : 1;
}
