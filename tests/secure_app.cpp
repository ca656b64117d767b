// A program that loads libcmt.so itself (dlopen: in a secure-execution process the loader ignores
// LD_PRELOAD paths) and makes a copy through its cudaMemcpy hook, so that cmt reads its
// configuration and, at exit, writes what CMT_STATS asks for. No GPU needed: CUDA answers the
// copy itself. usage: cmt_secure_app LIBCMT
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int devices = 0;  // the runtime is loaded, for cmt's hook to find (and any GPU or none will do)
  (void)cudaGetDeviceCount(&devices);
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  using Memcpy = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind);
  auto hooked = reinterpret_cast<Memcpy>(dlsym(lib, "cudaMemcpy"));
  if (!hooked) return 1;
  std::vector<char> a(4 << 20, 1), b(4 << 20, 0);
  std::printf("cudaMemcpy -> %d\n",
              static_cast<int>(hooked(b.data(), a.data(), a.size(), cudaMemcpyHostToHost)));
  return 0;
}
