// A CUDA program that needs no GPU: host <-> host cudaMemcpy calls of a small and a large size,
// through the runtime entry points cmt hooks. Where there is no GPU, CUDA fails them; the test is
// that libcmt.so forwards each one and counts why (hook_app.sh reads the statistics).
// With `optout`, the thread first asks libcmt.so (if loaded) to forward everything: each call is
// then counted as "disabled".
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "optout") == 0)
    if (auto forward =
            reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "cmt_forward_this_thread")))
      forward(1);
  std::vector<char> a(8 << 20, 1), b(8 << 20, 0);
  cudaError_t small = cudaMemcpy(b.data(), a.data(), 1024, cudaMemcpyHostToHost);
  cudaError_t large = cudaMemcpyAsync(b.data(), a.data(), a.size(), cudaMemcpyDefault, nullptr);
  std::printf("cudaMemcpy -> %d, cudaMemcpyAsync -> %d\n", static_cast<int>(small),
              static_cast<int>(large));
  return 0;
}
