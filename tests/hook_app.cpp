// A CUDA program that needs no GPU: host <-> host cudaMemcpy calls of a small and a large size,
// through the runtime entry points cmt hooks. Where there is no GPU, CUDA fails them; the test is
// that libcmt.so forwards each one and counts why (hook_app.sh reads the statistics).
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

int main() {
  std::vector<char> a(8 << 20, 1), b(8 << 20, 0);
  cudaError_t small = cudaMemcpy(b.data(), a.data(), 1024, cudaMemcpyHostToHost);
  cudaError_t large = cudaMemcpyAsync(b.data(), a.data(), a.size(), cudaMemcpyDefault, nullptr);
  std::printf("cudaMemcpy -> %d, cudaMemcpyAsync -> %d\n", static_cast<int>(small),
              static_cast<int>(large));
  return 0;
}
